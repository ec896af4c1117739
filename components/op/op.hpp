// Generalised matrix products (semirings) as components:
//   op.matmul   c[i,j] = map(reduce_k mul(a[i,k], b[k,j])), mul any expression over a and b
//               (a*b and a+b on the fast kernels), reduce sum, max, min, logsumexp or prod
//               (semiring.hpp), optional transposes, an output mask (per entry or per block);
//               accumulate=true combines the result with c's old value by the same reduction.
//               (sum, a*b) runs the GEMM on OpenBLAS; the others the kernels of semiring.hpp
//               (AVX-512, AVX2 or scalar, chosen at run time).
//   op.mask          a causal or band output mask
//   op.random_graph  a random undirected graph's GCN adjacency D^-1/2 (A + I) D^-1/2 in CSR
//   op.csr_matmul    Y = A X, A in CSR (or one row block of it, eigen.csr_block), X dense
//   op.backtrack     the best path of a max-plus recurrence from op.matmul's back-pointers (Viterbi)
//
//   <task component="op.matmul"> <in port="a" data="D"/> <in port="b" data="D"/>
//     <inout port="c" data="D2"/> <arg name="mul" value="a+b"/> <arg name="add" value="min"/> </task>
#pragma once
#include <ymlopt/sdk.hpp>

namespace ymlopt {
/// Registers the op.* components.
void register_op(Registry& reg);
}  // namespace ymlopt
