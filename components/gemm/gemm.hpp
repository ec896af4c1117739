// The dense GEMM every CPU kernel calls: C = alpha op(A) op(B) + beta C on
// row-major matrices with leading dimensions, on the calling thread only (the
// runtime provides the parallelism, one task per worker).
//
// Library::best: f32 runs oneDNN's dnnl_sgemm when ymlopt is built with it
// (cmake/onednn.cmake), else OpenBLAS; Library::openblas always OpenBLAS. f64
// runs OpenBLAS dgemm; given the content ids of unchanged operands
// (TensorView::content_id), it keeps their panels packed the way OpenBLAS's
// kernel reads them and runs that kernel on them (packed_dgemm.cpp), so the
// tasks of a tiled GEMM pack each tile once instead of once per task. Single-threaded here whatever OMP_NUM_THREADS /
// OPENBLAS_NUM_THREADS say. blas.gemm uses best; the model kernels (nn.linear,
// attention) OpenBLAS, which ran LLaMA 1.1B's linears 1.35x faster
// (docs/BENCHMARKS.md, "oneDNN's sgemm in the model linears").
//
//   // y[m,n] = x[m,k] · W[n,k]ᵀ
//   ymlopt::gemm::gemm(false, true, m, n, k, 1.0f, x, k, w, k, 0.0f, y, n);
#pragma once

#include <cstdint>
#include <string>

namespace ymlopt::gemm {

/// Which library runs an f32 GEMM.
enum class Library { best, openblas };

/// C = alpha op(A) op(B) + beta C (row-major; op(X) = Xᵀ when the flag is set).
/// beta == 0 overwrites C without reading it. Throws ymlopt::KernelError when a
/// dimension does not fit the library's integer type or the library fails.
void gemm(bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc,
          Library lib = Library::best);
void gemm(bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc,
          Library lib = Library::best);

/// Content ids of a GEMM's operands (TensorView::content_id; 0: unknown).
struct OperandIds {
  std::uint64_t a = 0, b = 0;
};

/// f64 with operand ids: the same product, from packed panels kept per id.
void gemm(bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc,
          OperandIds ids);

/// An f64 gemm() of these dimensions with operand ids keeps their packed
/// panels (the reuse is on and the product is big enough to be worth it).
bool keeps_panels(std::int64_t m, std::int64_t n, std::int64_t k, double alpha);

/// f32 with operand ids: given ids.b, op(B) is packed into column panels on
/// its second use in a run and kept per id (sgemm_panels.hpp;
/// YMLOPT_SGEMM_PACK_CACHE_MB, default 2048; full: the rest run unpacked on
/// `lib`, as does the first use) and the product runs on them; ids.a is not
/// used (A is packed per call, in blocks, as every GEMM does).
void gemm(bool transa, bool transb, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
          std::int64_t lda, const float* b, std::int64_t ldb, float beta, float* c, std::int64_t ldc,
          OperandIds ids, Library lib = Library::best);

/// An f32 gemm() of these dimensions with ids.b keeps op(B)'s panels.
bool keeps_sgemm_panels(std::int64_t m, std::int64_t n, std::int64_t k);

/// A packed-panel cache: panels packed (misses) and reused (hits), entries
/// dropped for room, bytes held now and at most, and (f32, which never drops
/// one) operands left unpacked because the budget was spent, and first uses
/// (not packed).
struct PackCacheStats {
  std::int64_t hits = 0, misses = 0, evictions = 0, bytes = 0, peak = 0, budget = 0, refused = 0, deferred = 0;
};
PackCacheStats pack_cache_stats();         // f64
PackCacheStats sgemm_pack_cache_stats();   // f32
/// Lowers the f32 panel cache's budget (a run under a memory limit); panels kept stay.
void limit_sgemm_pack_cache(std::int64_t bytes);

/// "weights packed once into 32-column panels (AVX-512 kernel, cache 2048 MiB)",
/// or that they are not kept.
std::string sgemm_panels_description();

/// "OpenBLAS dgemm, packed panels reused (SKYLAKEX kernel, cache 256 MiB)", or
/// why the reuse is off: OpenBLAS without exported kernels, a kernel that
/// failed the start-up check against cblas_dgemm, YMLOPT_GEMM_PACK_CACHE_MB=0.
std::string dgemm_library();

/// The library behind Library::best's f32 GEMM, as `ymlopt info` and the
/// benchmarks print it: "oneDNN 2.6.3 sgemm" or "OpenBLAS sgemm".
std::string sgemm_library();

}  // namespace ymlopt::gemm
