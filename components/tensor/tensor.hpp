// Built-in tensor components:
//   tensor.fill       x := value (all dtypes)
//   tensor.copy       y := x, converting dtypes (all dtypes; RNE for f16/bf16,
//                     round-to-nearest-even and saturation for i8/i32)
//   tensor.add        c = alpha*a + beta*b, b may be one row broadcast over rows
//   tensor.scale      x *= alpha
//   tensor.transpose  y = x^T (cache-blocked; all dtypes)
//   tensor.norm       Frobenius or max-abs norm, computed in double, reported as "norm"
//   tensor.compare    max_abs / max_rel difference of a and b, reported; optional tolerance
// tensor.fill/copy/add/scale also have OpenCL kernels (tensor_opencl.cpp).
#pragma once
#include <ymlopt/sdk.hpp>

namespace ymlopt {
/// Registers the tensor.* components.
void register_tensor(Registry& reg);
}  // namespace ymlopt
