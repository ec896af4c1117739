// CUDA kernels of the sparse family: CSR x dense SpMM with cuSPARSE's generic
// API (cusparseSpMM), in the layout of sparse::linear (sparse_linear.hpp):
// y[m, n] = x[m, k] W^T, W [n, k] in CSR (32-bit offsets and columns, rows are
// output features). Pointers are device pointers; `stream` is a cudaStream_t
// (nullptr: the default stream). Every CUDA / cuSPARSE status is checked and a
// failure throws std::runtime_error naming the call; bad sizes throw
// std::invalid_argument before anything is launched.
//
//   namespace sc = ymlopt::sparse::cuda;
//   sc::csr_linear_f32(d_values, d_col, d_row_ptr, n, k, nnz, d_x, m, k, d_y, n, stream);
//   std::cout << sc::nm24_unavailable_reason() << "\n";  // why 2:4 has no GPU kernel
#pragma once

#include <cstdint>
#include <string>

namespace ymlopt::sparse::cuda {

/// "" when csr_linear_f32 accepts these sizes, else why not.
std::string csr_linear_shape_error(std::int64_t n, std::int64_t k, std::int64_t nnz, std::int64_t m,
                                   std::int64_t ldx, std::int64_t ldy);

/// y[m, n] = x[m, k] W^T (y overwritten) with W given by values [nnz], col
/// [nnz] (in [0, k)) and row_ptr [n + 1] with row_ptr[0] == 0 and row_ptr[n] ==
/// nnz (sparse::Csr::view(); for a CsrWeight row slice, shift values and col by
/// its row_ptr[0] and pass rebased offsets). As column-major y^T = W x^T, one
/// cusparseSpMM (CUSPARSE_SPMM_ALG_DEFAULT, f32 compute) with its buffer from
/// cudaMallocAsync on `stream`; one cuSPARSE handle per calling thread.
void csr_linear_f32(const float* values, const std::int32_t* col, const std::int32_t* row_ptr, std::int64_t n,
                    std::int64_t k, std::int64_t nnz, const float* x, std::int64_t m, std::int64_t ldx, float* y,
                    std::int64_t ldy, void* stream);

/// Why 2:4 (nm24) weights have no GPU kernel in this build: NVIDIA's 2:4
/// sparse tensor-core GEMM is cuSPARSELt, which is not part of the CUDA
/// toolkit and was not used here (for `ymlopt info`).
std::string nm24_unavailable_reason();

}  // namespace ymlopt::sparse::cuda
