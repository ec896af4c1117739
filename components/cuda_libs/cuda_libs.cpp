#include "cuda_libs/cuda_libs.hpp"

#include <dlfcn.h>

#include <mutex>
#include <stdexcept>
#include <string>

namespace ymlopt::cuda_libs {
namespace {

void* open(Library lib) {
  void* h = ::dlopen(soname(lib), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    throw std::runtime_error(std::string("cannot load ") + soname(lib) + ": " + (e ? e : "dlopen failed"));
  }
  return h;
}

template <class F>
void resolve(void* h, Library lib, F& f, const char* name) {
  f = reinterpret_cast<F>(::dlsym(h, name));
  if (!f) throw std::runtime_error(std::string(soname(lib)) + " has no " + name);
}

/// Opens and resolves once; a failure is rethrown on every later call.
template <class Api, class Fill>
const Api& table(Library lib, Fill fill) {
  static Api api;
  static std::string error;
  static std::once_flag once;
  std::call_once(once, [&] {
    try {
      fill(open(lib), api);
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  if (!error.empty()) throw std::runtime_error(error);
  return api;
}

}  // namespace

const char* soname(Library lib) {
  switch (lib) {
    case Library::cublas: return YMLOPT_CUBLAS_SONAME;
    case Library::cublaslt: return YMLOPT_CUBLASLT_SONAME;
    case Library::cusparse: return YMLOPT_CUSPARSE_SONAME;
  }
  return "";
}

bool is_loaded(Library lib) {
  void* h = ::dlopen(soname(lib), RTLD_LAZY | RTLD_NOLOAD);  // a reference only if already open
  if (h) ::dlclose(h);
  return h != nullptr;
}

const Cublas& cublas() {
  return table<Cublas>(Library::cublas, [](void* h, Cublas& a) {
    const Library l = Library::cublas;
    resolve(h, l, a.cublasCreate_v2, "cublasCreate_v2");
    resolve(h, l, a.cublasDestroy_v2, "cublasDestroy_v2");
    resolve(h, l, a.cublasSetStream_v2, "cublasSetStream_v2");
    resolve(h, l, a.cublasSetMathMode, "cublasSetMathMode");
    resolve(h, l, a.cublasSgemm_v2, "cublasSgemm_v2");
    resolve(h, l, a.cublasGetStatusString, "cublasGetStatusString");
  });
}

const CublasLt& cublaslt() {
  return table<CublasLt>(Library::cublaslt, [](void* h, CublasLt& a) {
    const Library l = Library::cublaslt;
    resolve(h, l, a.cublasLtCreate, "cublasLtCreate");
    resolve(h, l, a.cublasLtDestroy, "cublasLtDestroy");
    resolve(h, l, a.cublasLtGetStatusString, "cublasLtGetStatusString");
    resolve(h, l, a.cublasLtMatmulDescCreate, "cublasLtMatmulDescCreate");
    resolve(h, l, a.cublasLtMatmulDescDestroy, "cublasLtMatmulDescDestroy");
    resolve(h, l, a.cublasLtMatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
    resolve(h, l, a.cublasLtMatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
    resolve(h, l, a.cublasLtMatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy");
    resolve(h, l, a.cublasLtMatmul, "cublasLtMatmul");
  });
}

const Cusparse& cusparse() {
  return table<Cusparse>(Library::cusparse, [](void* h, Cusparse& a) {
    const Library l = Library::cusparse;
    resolve(h, l, a.cusparseCreate, "cusparseCreate");
    resolve(h, l, a.cusparseDestroy, "cusparseDestroy");
    resolve(h, l, a.cusparseSetStream, "cusparseSetStream");
    resolve(h, l, a.cusparseGetErrorString, "cusparseGetErrorString");
    resolve(h, l, a.cusparseCreateConstCsr, "cusparseCreateConstCsr");
    resolve(h, l, a.cusparseDestroySpMat, "cusparseDestroySpMat");
    resolve(h, l, a.cusparseCreateConstDnMat, "cusparseCreateConstDnMat");
    resolve(h, l, a.cusparseCreateDnMat, "cusparseCreateDnMat");
    resolve(h, l, a.cusparseDestroyDnMat, "cusparseDestroyDnMat");
    resolve(h, l, a.cusparseSpMM_bufferSize, "cusparseSpMM_bufferSize");
    resolve(h, l, a.cusparseSpMM, "cusparseSpMM");
  });
}

}  // namespace ymlopt::cuda_libs
