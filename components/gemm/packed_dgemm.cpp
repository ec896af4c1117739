// f64 GEMM from packed panels kept across calls.
//
// A single-threaded OpenBLAS dgemm packs its A and B operands into the panel
// layout its micro-kernel reads, every call. The tasks of a tiled GEMM read
// each tile of A in n/bs tasks and each tile of B in n/bs tasks, so on 512
// tiles the packing is ~12% of their CPU time (docs/BENCHMARKS.md, section 2).
// OpenBLAS exports its per-CPU packing routines and micro-kernel
// (dgemm_itcopy_SKYLAKEX, dgemm_kernel_SKYLAKEX, ...): this file runs the
// blocked GEMM loop itself with them, for the CPU OpenBLAS chose at start-up
// (openblas_get_corename), and keeps the packed panels of operands whose
// contents the engine names (TensorView::content_id) in a cache bounded by
// YMLOPT_GEMM_PACK_CACHE_MB (default 256 MiB). Before first use the loop is
// checked against cblas_dgemm on all four transpositions; anything missing or
// different turns the reuse off and every call goes to cblas_dgemm.
#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <vector>
#include <ymlopt/content_cache.hpp>
#include <ymlopt/sdk.hpp>

#include "gemm/gemm.hpp"

namespace ymlopt::gemm {
namespace {

// OpenBLAS's BLASLONG is long on LP64 Linux.
using Kernel = int (*)(long m, long n, long k, double alpha, double* sa, double* sb, double* c, long ldc);
using Copy = int (*)(long m, long n, double* a, long lda, double* out);

// Blocking of the loop (col-major: C[M,N] += A[M,K] B[K,N]): a P x Q block of
// A stays in L2 while the kernel sweeps a Q x R block of B. Q, the depth of a
// block, is the core's (OpenBlas::q): some kernels hold a panel of B in a stack
// buffer sized for their own GEMM_Q.
constexpr long kP = 192, kR = 2048;
constexpr long kMinDim = 64;  // below this the packing saved is not worth the bookkeeping

struct OpenBlas {
  Kernel kernel = nullptr;
  Copy itcopy = nullptr, incopy = nullptr, oncopy = nullptr, otcopy = nullptr;
  std::string core;     // "SKYLAKEX"
  long q = 0;           // K per block: at most the kernel's GEMM_Q
  std::string why_not;  // non-empty: reuse off
};

void free_aligned(double* p) { std::free(p); }
using Buffer = std::unique_ptr<double, decltype(&free_aligned)>;

Buffer alloc(size_t doubles) {
  // 4 KiB pages: asking for transparent huge pages (MADV_HUGEPAGE) made some
  // runs 20-40% slower on the dev box, stalled in the kernel's compaction
  // and a little slack past the end, where a kernel's vector loads of a
  // remainder panel could reach (OpenBLAS's own buffers have plenty)
  const size_t bytes = (doubles * sizeof(double) + 512 + 4095) / 4096 * 4096;
  auto* p = static_cast<double*>(std::aligned_alloc(4096, bytes));
  if (!p) throw KernelError("packed dgemm: out of memory for " + std::to_string(bytes) + " bytes of panels");
  return Buffer(p, free_aligned);
}

// One operand as the kernel reads it: A (rows = M, blocks of kP x q) or B
// (rows = N, blocks of q x kR), every block 64-byte aligned in one buffer.
struct Panels {
  Buffer data{nullptr, free_aligned};
  std::vector<size_t> offset;  // block (k block, row block) at offset[kb * nrb + rb]
  long nrb = 0;
};

long ceil_div(long a, long b) { return (a + b - 1) / b; }

// Packs block (kb, rb) of an operand: A side (`a_side`) blocks kP rows x q
// of K, B side kR columns x q of K. `trans`: the operand is stored
// transposed (col-major), as in OpenBLAS's level-3 driver.
void pack_block(const OpenBlas& o, bool a_side, bool trans, const double* x, long ldx, long kb, long rb, long kext,
                long rext, double* out) {
  const long ls = kb * o.q, ml = std::min(o.q, kext - ls);
  const long rs = rb * (a_side ? kP : kR), rl = std::min(a_side ? kP : kR, rext - rs);
  double* p = const_cast<double*>(x);
  if (a_side) {
    if (!trans)
      o.itcopy(ml, rl, p + rs + ls * ldx, ldx, out);
    else
      o.incopy(ml, rl, p + ls + rs * ldx, ldx, out);
  } else {
    if (!trans)
      o.oncopy(ml, rl, p + ls + rs * ldx, ldx, out);
    else
      o.otcopy(ml, rl, p + rs + ls * ldx, ldx, out);
  }
}

size_t block_doubles(long q, bool a_side, long kb, long rb, long kext, long rext) {
  const long ml = std::min(q, kext - kb * q);
  const long step = a_side ? kP : kR;
  const long rl = std::min(step, rext - rb * step);
  return (size_t(ml * rl) + 7) / 8 * 8;
}

void pack_all(const OpenBlas& o, bool a_side, bool trans, const double* x, long ldx, long kext, long rext,
              Panels& out) {
  const long nkb = ceil_div(kext, o.q);
  out.nrb = ceil_div(rext, a_side ? kP : kR);
  out.offset.assign(size_t(nkb * out.nrb), 0);
  size_t total = 0;
  for (long kb = 0; kb < nkb; ++kb)
    for (long rb = 0; rb < out.nrb; ++rb) {
      out.offset[size_t(kb * out.nrb + rb)] = total;
      total += block_doubles(o.q, a_side, kb, rb, kext, rext);
    }
  out.data = alloc(total);
  for (long kb = 0; kb < nkb; ++kb)
    for (long rb = 0; rb < out.nrb; ++rb)
      pack_block(o, a_side, trans, x, ldx, kb, rb, kext, rext, out.data.get() + out.offset[size_t(kb * out.nrb + rb)]);
}

// ------------------------------------------------------------------ cache

struct Key {
  std::uint64_t id;
  long rows, k;
  bool a_side, trans;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    return hash_fields(k.id, k.rows, k.k, k.a_side, k.trans);
  }
};

// The panels of one operand; the first request packs them, null when they
// would not fit the budget (the caller then packs block by block).
class PackCache {
 public:
  PackCache() : cache_(cache_budget_from_env("YMLOPT_GEMM_PACK_CACHE_MB", 256)) {}
  std::int64_t budget() const { return cache_.budget(); }
  std::shared_ptr<const Panels> get(const OpenBlas& o, const Key& key, const double* x, long ldx) {
    auto size = [&] {
      const long nkb = ceil_div(key.k, o.q), nrb = ceil_div(key.rows, key.a_side ? kP : kR);
      std::int64_t doubles = 0;
      for (long kb = 0; kb < nkb; ++kb)
        for (long rb = 0; rb < nrb; ++rb) doubles += std::int64_t(block_doubles(o.q, key.a_side, kb, rb, key.k, key.rows));
      return doubles * std::int64_t(sizeof(double));
    };
    return cache_.get(key, key.id >> 32, size,
                      [&](Panels& p) { pack_all(o, key.a_side, key.trans, x, ldx, key.k, key.rows, p); });
  }
  PackCacheStats stats() {
    const ContentCacheStats s = cache_.stats();
    return PackCacheStats{s.hits, s.misses, s.evictions, s.bytes, s.peak, s.budget};
  }

 private:
  ContentCache<Key, Panels, KeyHash> cache_;
};

PackCache& cache() {
  static PackCache c;
  return c;
}

// ------------------------------------------------------------------ the loop

// C[M,N] (col-major, ldc) = alpha A B + beta C, with A and B given either as
// cached panels (pa/pb) or as matrices packed here block by block.
void run_loop(const OpenBlas& o, long M, long N, long K, double alpha, bool ta, const double* a, long lda,
              const Panels* pa, bool tb, const double* b, long ldb, const Panels* pb, double beta, double* c,
              long ldc) {
  if (beta != 1.0)
    for (long j = 0; j < N; ++j) {
      double* col = c + j * ldc;
      if (beta == 0.0)
        std::fill(col, col + M, 0.0);
      else
        for (long i = 0; i < M; ++i) col[i] *= beta;
    }
  thread_local Buffer sa_own{nullptr, free_aligned}, sb_own{nullptr, free_aligned};
  if (!pa && !sa_own) sa_own = alloc(size_t(kP * o.q));
  if (!pb && !sb_own) sb_own = alloc(size_t(o.q * kR));
  const long nkb = ceil_div(K, o.q), nib = ceil_div(M, kP), njb = ceil_div(N, kR);
  for (long jb = 0; jb < njb; ++jb) {
    const long js = jb * kR, nj = std::min(kR, N - js);
    for (long kb = 0; kb < nkb; ++kb) {
      const long ml = std::min(o.q, K - kb * o.q);
      double* sb;
      if (pb) {
        sb = pb->data.get() + pb->offset[size_t(kb * pb->nrb + jb)];
      } else {
        sb = sb_own.get();
        pack_block(o, false, tb, b, ldb, kb, jb, K, N, sb);
      }
      for (long ib = 0; ib < nib; ++ib) {
        const long is = ib * kP, mi = std::min(kP, M - is);
        double* sa;
        if (pa) {
          sa = pa->data.get() + pa->offset[size_t(kb * pa->nrb + ib)];
        } else {
          sa = sa_own.get();
          pack_block(o, true, ta, a, lda, kb, ib, K, M, sa);
        }
        o.kernel(mi, nj, ml, alpha, sa, sb, c + is + js * ldc, ldc);
      }
    }
  }
}

// Finds OpenBLAS's routines for the CPU it runs on and checks the loop
// against cblas_dgemm; why_not says what failed.
OpenBlas probe() {
  OpenBlas o;
  if (cache().budget() == 0) {
    o.why_not = "YMLOPT_GEMM_PACK_CACHE_MB=0";
    return o;
  }
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&cblas_dgemm), &info) || !info.dli_fname) {
    o.why_not = "cannot tell which library provides cblas_dgemm";
    return o;
  }
  void* lib = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  if (!lib) {
    o.why_not = std::string("cannot open ") + info.dli_fname;
    return o;
  }
  using CoreName = char* (*)();
  auto corename = reinterpret_cast<CoreName>(dlsym(lib, "openblas_get_corename"));
  if (!corename) {
    o.why_not = std::string(info.dli_fname) + " is not OpenBLAS";
    return o;
  }
  for (const char* ch = corename(); ch && *ch; ++ch) o.core += char(std::toupper(static_cast<unsigned char>(*ch)));
  // the cores whose kernels this loop has run on, and their GEMM_Q: a kernel
  // called with a deeper block than it was built for writes past its stack
  // buffer (Haswell's and Zen's do), which no check after the call can catch
  if (o.core == "SKYLAKEX" || o.core == "COOPERLAKE") {
    o.q = 384;
  } else if (o.core == "HASWELL" || o.core == "ZEN") {
    o.q = 256;
  } else {
    o.why_not = "the " + o.core + " kernel's block depth is not known here";
    return o;
  }
  auto find = [&](const char* base, auto& fn) {
    void* s = dlsym(lib, (std::string(base) + "_" + o.core).c_str());
    if (!s) s = dlsym(lib, base);  // an OpenBLAS built for one CPU
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(s);
    if (!s && o.why_not.empty()) o.why_not = "OpenBLAS exports no " + std::string(base) + " for " + o.core;
  };
  find("dgemm_kernel", o.kernel);
  find("dgemm_itcopy", o.itcopy);
  find("dgemm_incopy", o.incopy);
  find("dgemm_oncopy", o.oncopy);
  find("dgemm_otcopy", o.otcopy);
  if (!o.why_not.empty()) return o;
  // every transposition, across block edges, against cblas_dgemm
  const long M = kP + 13, N = 70, K = o.q + 17;
  std::vector<double> a(size_t(K * (K + M))), b(size_t(K * (K + N))), c0(size_t(M * N)), c1;
  std::uint64_t s = 42;
  auto rnd = [&] {
    s = s * 6364136223846793005ULL + 1442695040888963407ULL;
    return double(s >> 11) / double(1ULL << 53) - 0.5;
  };
  for (auto& v : a) v = rnd();
  for (auto& v : b) v = rnd();
  for (auto& v : c0) v = rnd();
  for (int t = 0; t < 4; ++t) {
    const bool ta = t & 1, tb = t & 2;
    const long lda = ta ? K + 3 : M + 5, ldb = tb ? N + 2 : K + 1;
    c1 = c0;
    std::vector<double> ref = c0;
    cblas_dgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, int(M), int(N), int(K),
                0.75, a.data(), int(lda), b.data(), int(ldb), 0.5, ref.data(), int(M));
    run_loop(o, M, N, K, 0.75, ta, a.data(), lda, nullptr, tb, b.data(), ldb, nullptr, 0.5, c1.data(), M);
    double worst = 0;
    for (size_t i = 0; i < c1.size(); ++i) worst = std::max(worst, std::fabs(c1[i] - ref[i]));
    if (!(worst < 1e-10)) {
      o.why_not = "the " + o.core + " kernel disagreed with cblas_dgemm (max |diff| " + std::to_string(worst) +
                  ", transposes " + std::to_string(ta) + std::to_string(tb) + ")";
      return o;
    }
  }
  return o;
}

const OpenBlas& openblas() {
  static const OpenBlas o = probe();
  return o;
}

}  // namespace

bool keeps_panels(std::int64_t m, std::int64_t n, std::int64_t k, double alpha) {
  return std::min({m, n, k}) >= kMinDim && alpha != 0.0 && openblas().why_not.empty();
}

void gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, double alpha, const double* a,
          std::int64_t lda, const double* b, std::int64_t ldb, double beta, double* c, std::int64_t ldc,
          OperandIds ids) {
  if (!(ids.a || ids.b) || !keeps_panels(m, n, k, alpha))
    return gemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
  const OpenBlas* o = &openblas();
  // Row-major C = op(A) op(B) is col-major Cᵀ = op(B)ᵀ op(A)ᵀ: B's data are the
  // col-major left operand (rows n), A's the right one (columns m).
  std::shared_ptr<const Panels> left, right;
  if (ids.b) left = cache().get(*o, Key{ids.b, long(n), long(k), true, tb}, b, long(ldb));
  if (ids.a) right = cache().get(*o, Key{ids.a, long(m), long(k), false, ta}, a, long(lda));
  run_loop(*o, long(n), long(m), long(k), alpha, tb, b, long(ldb), left.get(), ta, a, long(lda), right.get(), beta, c,
           long(ldc));
}

PackCacheStats pack_cache_stats() { return cache().stats(); }

std::string dgemm_library() {
  const OpenBlas& o = openblas();
  if (!o.why_not.empty()) return "OpenBLAS dgemm (packed panels not reused: " + o.why_not + ")";
  return "OpenBLAS dgemm, packed panels of unchanged tiles reused (" + o.core + " kernel, cache " +
         std::to_string(cache().budget() >> 20) + " MiB)";
}

}  // namespace ymlopt::gemm
