// gemm::sgemm_panels: the driver, the scalar path, and the f32 gemm() that
// keeps the panels of named operands.
#include "gemm/sgemm_panels.hpp"

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <ymlopt/content_cache.hpp>
#include <ymlopt/sdk.hpp>

#include "gemm/gemm.hpp"
#include "gemm/sgemm_panels_internal.hpp"

namespace ymlopt::gemm {
namespace {

using std::int64_t;

bool has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f");
  return has;
}
bool has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

SgemmIsa resolve(SgemmIsa isa) {
  if (isa == SgemmIsa::avx512 && !has_avx512()) throw KernelError("sgemm_panels: this CPU has no AVX-512F");
  if (isa == SgemmIsa::avx2 && !has_avx2()) throw KernelError("sgemm_panels: this CPU has no AVX2/FMA");
  if (isa != SgemmIsa::best) return isa;
  return has_avx512() ? SgemmIsa::avx512 : has_avx2() ? SgemmIsa::avx2 : SgemmIsa::scalar;
}

/// alpha op(A)[:, k0:k0+kc] into row blocks of mr (panels_impl::Block's layout).
void pack_a(bool a_trans, const float* a, int64_t lda, float alpha, int64_t m, int64_t k0, int64_t kc, int64_t mr,
            float* out) {
  for (int64_t i0 = 0; i0 < m; i0 += mr) {
    const int64_t rows = std::min(mr, m - i0);
    float* dst = out + i0 * kc;
    if (a_trans) {
      for (int64_t q = 0; q < kc; ++q) {
        const float* src = a + (k0 + q) * lda + i0;
        for (int64_t r = 0; r < rows; ++r) dst[q * rows + r] = alpha * src[r];
      }
    } else {
      for (int64_t r = 0; r < rows; ++r) {
        const float* src = a + (i0 + r) * lda + k0;
        for (int64_t q = 0; q < kc; ++q) dst[q * rows + r] = alpha * src[q];
      }
    }
  }
}

}  // namespace

namespace panels_impl {

void block_scalar(const Block& blk) {
  for (int64_t j0 = 0; j0 < blk.n; j0 += kPanelCols) {
    const float* p = blk.b + (j0 / kPanelCols) * blk.ldp;
    const int64_t cols = std::min(kPanelCols, blk.n - j0);
    for (int64_t i0 = 0; i0 < blk.m; i0 += blk.mr) {
      const int64_t rows = std::min(blk.mr, blk.m - i0);
      const float* a = blk.a + i0 * blk.kc;
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < cols; ++j) {
          float* c = blk.c + (i0 + r) * blk.ldc + j0 + j;
          float s = blk.add ? *c : 0.0f;
          for (int64_t q = 0; q < blk.kc; ++q) s += a[q * rows + r] * p[q * kPanelCols + j];
          *c = s;
        }
    }
  }
}

}  // namespace panels_impl

const char* sgemm_panels_isa_name() {
  switch (resolve(SgemmIsa::best)) {
    case SgemmIsa::avx512: return "AVX-512";
    case SgemmIsa::avx2: return "AVX2";
    default: return "scalar";
  }
}

int64_t panel_floats(int64_t n, int64_t k) { return (n + kPanelCols - 1) / kPanelCols * kPanelCols * k; }

void pack_panels(const float* b, bool b_trans, int64_t n, int64_t k, int64_t ldb, float* out) {
  for (int64_t j0 = 0; j0 < n; j0 += kPanelCols) {
    float* p = out + j0 * k;  // panel j0 / 32 holds k rows of 32
    const int64_t cols = std::min(kPanelCols, n - j0);
    if (b_trans) {  // B [n, k]: column j of op(B) is row j of B; by 16 of k, so that the writes stay in L1
      for (int64_t q0 = 0; q0 < k; q0 += 16) {
        const int64_t qn = std::min<int64_t>(16, k - q0);
        float* dst = p + q0 * kPanelCols;
        for (int64_t j = 0; j < cols; ++j) {
          const float* src = b + (j0 + j) * ldb + q0;
          for (int64_t q = 0; q < qn; ++q) dst[q * kPanelCols + j] = src[q];
        }
      }
    } else {
      for (int64_t q = 0; q < k; ++q) std::copy_n(b + q * ldb + j0, cols, p + q * kPanelCols);
    }
    if (cols < kPanelCols)
      for (int64_t q = 0; q < k; ++q) std::fill(p + q * kPanelCols + cols, p + (q + 1) * kPanelCols, 0.0f);
  }
}

void sgemm_panels(bool a_trans, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda,
                  const float* panels, float beta, float* c, int64_t ldc, SgemmIsa isa) {
  using std::to_string;
  if (m < 0 || n < 0 || k < 0) throw KernelError("sgemm_panels: negative dimension");
  if (m == 0 || n == 0) return;
  if (!c || ldc < n) throw KernelError("sgemm_panels: ldc " + to_string(ldc) + " < n " + to_string(n));
  isa = resolve(isa);
  const bool add = beta != 0.0f;
  if (add && beta != 1.0f)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] *= beta;
  if (k == 0 || alpha == 0.0f) {  // BLAS reads neither operand then
    if (!add)
      for (int64_t i = 0; i < m; ++i) std::fill(c + i * ldc, c + i * ldc + n, 0.0f);
    return;
  }
  if (!a || !panels) throw KernelError("sgemm_panels: null operand");
  if (lda < (a_trans ? m : k))
    throw KernelError("sgemm_panels: lda " + to_string(lda) + " < " + to_string(a_trans ? m : k));
  const int64_t mr = isa == SgemmIsa::avx512 ? panels_impl::kMrAvx512
                     : isa == SgemmIsa::avx2 ? panels_impl::kMrAvx2
                                             : panels_impl::kMrScalar;
  auto* run = isa == SgemmIsa::avx512 ? panels_impl::block_avx512
              : isa == SgemmIsa::avx2 ? panels_impl::block_avx2
                                      : panels_impl::block_scalar;
  thread_local std::vector<float> buf;
  const int64_t kb = std::min(k, panels_impl::kKBlock);
  buf.resize(std::size_t(m * kb));
  panels_impl::Block blk;
  blk.a = buf.data();
  blk.m = m;
  blk.mr = mr;
  blk.ldp = k * kPanelCols;
  blk.n = n;
  blk.c = c;
  blk.ldc = ldc;
  for (int64_t k0 = 0; k0 < k; k0 += panels_impl::kKBlock) {
    blk.kc = std::min(panels_impl::kKBlock, k - k0);
    pack_a(a_trans, a, lda, alpha, m, k0, blk.kc, mr, buf.data());
    blk.b = panels + k0 * kPanelCols;
    blk.add = add || k0 > 0;
    run(blk);
  }
}

// ------------------------------------------------------------------ kept panels

namespace {

void free_floats(float* p) { std::free(p); }

struct Kept {
  std::unique_ptr<float, decltype(&free_floats)> data{nullptr, free_floats};
};

struct Key {
  std::uint64_t id;
  int64_t n, k;
  bool trans;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& k) const {
    return hash_fields(k.id, k.n, k.k, k.trans);
  }
};

// Eviction::keep: a model's weights are read in the same order every forward,
// so once the budget is full the rest run unpacked rather than evicting the
// panels the next forward reads first. Admission::second: packing costs what
// one unpacked product spends packing (plus the new pages), so an operand read
// once (one forward) is never packed; the second read packs it.
ContentCache<Key, Kept, KeyHash>& kept() {
  static ContentCache<Key, Kept, KeyHash> c(cache_budget_from_env("YMLOPT_SGEMM_PACK_CACHE_MB", 2048), Eviction::keep,
                                            Admission::second);
  return c;
}

}  // namespace

bool keeps_sgemm_panels(int64_t m, int64_t n, int64_t k) {
  // one row (a decode step) runs as a GEMV that streams the weight as it is:
  // panels would only add a packed copy
  return m > 1 && n >= 16 && k >= 16 && kept().budget() > 0;
}

void gemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, float alpha, const float* a, int64_t lda, const float* b,
          int64_t ldb, float beta, float* c, int64_t ldc, OperandIds ids, Library lib) {
  if (!ids.b || !keeps_sgemm_panels(m, n, k) || alpha == 0.0f)
    return gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, lib);
  const Key key{ids.b, n, k, tb};
  auto p = kept().get(
      key, ids.b >> 32, [&] { return panel_floats(n, k) * int64_t(sizeof(float)); },
      [&](Kept& v) {
        const std::size_t bytes = (std::size_t(panel_floats(n, k)) * sizeof(float) + 4095) / 4096 * 4096;
        v.data.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
        if (!v.data) throw KernelError("sgemm panels: out of memory for " + std::to_string(bytes) + " bytes");
        pack_panels(b, tb, n, k, ldb, v.data.get());
      });
  if (!p) return gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc, lib);
  sgemm_panels(ta, m, n, k, alpha, a, lda, p->data.get(), beta, c, ldc);
}

PackCacheStats sgemm_pack_cache_stats() {
  const ContentCacheStats s = kept().stats();
  return PackCacheStats{s.hits, s.misses, s.evictions, s.bytes, s.peak, s.budget, s.refused, s.deferred};
}

void limit_sgemm_pack_cache(std::int64_t bytes) { kept().lower_budget(bytes); }

std::string sgemm_panels_description() {
  if (kept().budget() == 0) return "panels not kept (YMLOPT_SGEMM_PACK_CACHE_MB=0)";
  return std::string("weights packed once into 32-column panels (") + sgemm_panels_isa_name() + " kernel, cache " +
         std::to_string(kept().budget() >> 20) + " MiB)";
}

}  // namespace ymlopt::gemm
