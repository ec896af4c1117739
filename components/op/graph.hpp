// op.random_graph, op.csr_matmul and op.backtrack (graph.cpp), registered by register_op.
#pragma once
#include <ymlopt/sdk.hpp>

namespace ymlopt {
void register_op_graph(Registry& reg);
}  // namespace ymlopt
