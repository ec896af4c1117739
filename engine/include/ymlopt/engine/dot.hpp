#pragma once
#include <string>

#include "ymlopt/engine/ir.hpp"

namespace ymlopt {
/// The DAG in Graphviz DOT: one node per task labelled "component\nline N"
/// (plus its name), solid edges for data dependencies, dashed for events.
///
///   std::cout << dag_to_dot(dag);   // ymlopt graph wf.xml | dot -Tsvg
std::string dag_to_dot(const Dag& dag);
}  // namespace ymlopt
