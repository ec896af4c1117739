// cuBLAS, cuBLASLt and cuSPARSE opened on first use (dlopen), not at program
// start: loading libcublasLt alone adds ~150 MiB to the resident set of every
// process, GPU or not, and most runs never call it. The CUDA kernels call the
// libraries through these tables; the first call opens the library (the
// SONAME found at build time) and resolves every entry, or throws
// std::runtime_error naming the library and dlerror().
//
//   const auto& lt = ymlopt::cuda_libs::cublaslt();
//   cublasLtHandle_t h;
//   lt.cublasLtCreate(&h);
#pragma once
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cusparse.h>

namespace ymlopt::cuda_libs {

/// The cuBLAS entry points the kernels use (the _v2 ones behind cublas_v2.h's names).
struct Cublas {
  decltype(&::cublasCreate_v2) cublasCreate_v2;
  decltype(&::cublasDestroy_v2) cublasDestroy_v2;
  decltype(&::cublasSetStream_v2) cublasSetStream_v2;
  decltype(&::cublasSetMathMode) cublasSetMathMode;
  decltype(&::cublasSgemm_v2) cublasSgemm_v2;
  decltype(&::cublasGetStatusString) cublasGetStatusString;
};

struct CublasLt {
  decltype(&::cublasLtCreate) cublasLtCreate;
  decltype(&::cublasLtDestroy) cublasLtDestroy;
  decltype(&::cublasLtGetStatusString) cublasLtGetStatusString;
  decltype(&::cublasLtMatmulDescCreate) cublasLtMatmulDescCreate;
  decltype(&::cublasLtMatmulDescDestroy) cublasLtMatmulDescDestroy;
  decltype(&::cublasLtMatmulDescSetAttribute) cublasLtMatmulDescSetAttribute;
  decltype(&::cublasLtMatrixLayoutCreate) cublasLtMatrixLayoutCreate;
  decltype(&::cublasLtMatrixLayoutDestroy) cublasLtMatrixLayoutDestroy;
  decltype(&::cublasLtMatmul) cublasLtMatmul;
};

struct Cusparse {
  decltype(&::cusparseCreate) cusparseCreate;
  decltype(&::cusparseDestroy) cusparseDestroy;
  decltype(&::cusparseSetStream) cusparseSetStream;
  decltype(&::cusparseGetErrorString) cusparseGetErrorString;
  decltype(&::cusparseCreateConstCsr) cusparseCreateConstCsr;
  decltype(&::cusparseDestroySpMat) cusparseDestroySpMat;
  decltype(&::cusparseCreateConstDnMat) cusparseCreateConstDnMat;
  decltype(&::cusparseCreateDnMat) cusparseCreateDnMat;
  decltype(&::cusparseDestroyDnMat) cusparseDestroyDnMat;
  decltype(&::cusparseSpMM_bufferSize) cusparseSpMM_bufferSize;
  decltype(&::cusparseSpMM) cusparseSpMM;
};

const Cublas& cublas();
const CublasLt& cublaslt();
const Cusparse& cusparse();

enum class Library { cublas, cublaslt, cusparse };
/// The SONAME dlopen is given ("libcublasLt.so.13").
const char* soname(Library lib);
/// Whether this process has opened `lib` (through the tables or otherwise).
bool is_loaded(Library lib);

}  // namespace ymlopt::cuda_libs
