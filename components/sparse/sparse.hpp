// Sparse-format components (CPU), registered by register_sparse:
//   sparse.pack_nm24    w f32 [n, k] with at most 2 nonzeros per group of 4 along k
//                       -> values f32 [n, k/2], index i8 [n, k/8] (format: sparse_linear.hpp)
//   sparse.unpack_nm24  values + index -> w f32 [n, k] (zeros elsewhere)
//
//   ymlopt::register_sparse(reg);   // then <task component="sparse.pack_nm24"> ... </task>
#pragma once
#include <ymlopt/sdk.hpp>

namespace ymlopt {
/// Registers every sparse.* component.
void register_sparse(Registry& reg);
}  // namespace ymlopt
