// Built-in dense linear-algebra components (OpenBLAS / LAPACKE), f32 and f64:
//   blas.gemm   C = alpha*op(A)*op(B) + beta*C
//   blas.axpy   y += alpha*x
//   blas.potrf  in-place lower Cholesky factor (A = L*L^T)
//   blas.getrf  in-place LU without pivoting (A = L*U, L unit lower; tiled LU and Gauss-Jordan)
//   blas.getri  in-place inverse of a square tile (LAPACK getrf + getri)
//   blas.trsm   triangular solve (default: X*L^T = B, the tiled-Cholesky panel update)
//   blas.syrk   C = alpha*A*A^T + beta*C on one triangle (default lower)
// gemm, syrk and trsm also have OpenCL kernels through CLBlast (blas_opencl.hpp).
#pragma once
#include <ymlopt/sdk.hpp>

namespace ymlopt {
/// Registers the blas.* components.
void register_blas(Registry& reg);
}  // namespace ymlopt
