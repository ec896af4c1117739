// Semiring products (components/op/semiring.hpp) in GOP/s (one ⊗ and one ⊕
// per term: 2 m n k operations), one thread: (max, +), (min, +) and
// (logsumexp, +) on each ISA this CPU has and on the scalar path, against a
// plain C loop of the same product (i, j, k; what a compiler makes of it at
// -O2), against the f32 FMA peak of one core (2 x lanes x FMA ports x clock,
// measured here by a loop of independent FMAs), and (sum, a*b) against the
// GEMM (op::matmul's fast path is gemm::gemm on OpenBLAS; blas.gemm's is the
// library default, oneDNN where built with it), OpenBLAS set to one thread
// as in the workers.
//
//   ymlopt_bench_semiring [--n 1024] [--reps 5]
#include <immintrin.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "bench_args.hpp"
#include "gemm/gemm.hpp"
#include "op/element_program.hpp"
#include "op/semiring.hpp"

// GCC 12's _mm512_reduce_add_ps passes an undefined vector (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

namespace {

using namespace ymlopt;
using std::int64_t;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

template <class F> double best_of(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now();
    f();
    best = std::min(best, now() - t0);
  }
  return best;
}

/// f32 FMA operations per second of one core: 12 independent chains of 16-lane
/// (AVX-512) or 8-lane FMAs.
__attribute__((target("avx512f"))) double fma_peak_avx512() {
  __m512 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm512_set1_ps(float(i));
  const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
  const long iters = 20'000'000;
  const double t0 = now();
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm512_fmadd_ps(acc[i], m, a);
  const double dt = now() - t0;
  float sink = 0;
  for (int i = 0; i < 12; ++i) sink += _mm512_reduce_add_ps(acc[i]);
  std::printf("(fma sink %g)\n", double(sink));
  return 2.0 * 16 * 12 * double(iters) / dt;
}

__attribute__((target("avx2,fma"))) double fma_peak_avx2() {
  __m256 acc[12];
  for (int i = 0; i < 12; ++i) acc[i] = _mm256_set1_ps(float(i));
  const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
  const long iters = 20'000'000;
  const double t0 = now();
  for (long it = 0; it < iters; ++it)
    for (int i = 0; i < 12; ++i) acc[i] = _mm256_fmadd_ps(acc[i], m, a);
  const double dt = now() - t0;
  alignas(32) float out[8];
  float sink = 0;
  for (int i = 0; i < 12; ++i) {
    _mm256_store_ps(out, acc[i]);
    for (float x : out) sink += x;
  }
  std::printf("(fma sink %g)\n", double(sink));
  return 2.0 * 8 * 12 * double(iters) / dt;
}

/// The textbook (max, +) / (min, +) product.
void plain_tropical(bool is_min, int64_t n, const float* a, const float* b, float* c) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = is_min ? std::numeric_limits<float>::infinity() : -std::numeric_limits<float>::infinity();
      for (int64_t k = 0; k < n; ++k) {
        const float x = a[i * n + k] + b[k * n + j];
        acc = is_min ? std::min(acc, x) : std::max(acc, x);
      }
      c[i * n + j] = acc;
    }
}

}  // namespace

extern "C" void openblas_set_num_threads(int);  // OpenBLAS: one thread, as in a StarPU worker

int main(int argc, char** argv) {
  openblas_set_num_threads(1);
  const int64_t n = int64_t(bench::arg(argc, argv, "--n", 1024));
  const int reps = int(bench::arg(argc, argv, "--reps", 5));
  std::vector<float> a(size_t(n * n)), b(size_t(n * n)), c(size_t(n * n)), ref(size_t(n * n));
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> d(-4, 4);
  for (float& x : a) x = d(gen);
  for (float& x : b) x = d(gen);
  const double ops = 2.0 * double(n) * double(n) * double(n);
  std::printf("semiring products, n = %lld, one thread; best ISA here: %s\n", (long long)n, op::best_isa_name());
  const double peak = op::cpu_has_avx512() ? fma_peak_avx512() : op::cpu_has_avx2() ? fma_peak_avx2() : 0.0;
  if (peak > 0) std::printf("f32 FMA peak of one core (measured): %.1f GFLOP/s\n", peak / 1e9);
  std::vector<op::Isa> isas = {op::Isa::scalar};
  if (op::cpu_has_avx2()) isas.push_back(op::Isa::avx2);
  if (op::cpu_has_avx512()) isas.push_back(op::Isa::avx512);
  const char* isa_names[] = {"best", "scalar", "avx2", "avx512"};
  std::printf("\n%-12s %-8s %10s %10s %12s\n", "pair", "path", "GOP/s", "vs plain", "of FMA peak");
  for (auto [pair, s] : {std::pair{"(max, +)", op::Semiring{op::Combine::add, op::Reduce::max}},
                         std::pair{"(min, +)", op::Semiring{op::Combine::add, op::Reduce::min}},
                         std::pair{"(lse, +)", op::Semiring{op::Combine::add, op::Reduce::logsumexp}}}) {
    double plain = 0;
    if (s.add != op::Reduce::logsumexp) {
      const double t = best_of(std::max(1, reps / 2), [&] {
        plain_tropical(s.add == op::Reduce::min, n, a.data(), b.data(), ref.data());
      });
      plain = ops / t;
      std::printf("%-12s %-8s %10.2f %10s %11.1f%%\n", pair, "plain", plain / 1e9, "1.00", peak > 0 ? 100 * plain / peak : 0);
    }
    for (op::Isa isa : isas) {
      const double t = best_of(reps, [&] {
        op::matmul(s, false, false, n, n, n, a.data(), n, b.data(), n, c.data(), n, false, isa);
      });
      if (plain > 0 && c != ref) std::printf("  (values differ from the plain loop's)\n");
      const double rate = ops / t;
      char vs[32] = "-";
      if (plain > 0) std::snprintf(vs, sizeof vs, "%.2f", rate / plain);
      std::printf("%-12s %-8s %10.2f %10s %11.1f%%\n", pair, isa_names[int(isa)], rate / 1e9, vs,
                  peak > 0 ? 100 * rate / peak : 0);
    }
  }
  // (sum, a*b): op::matmul's path is gemm::gemm on OpenBLAS (as nn.linear); against that call, and against
  // blas.gemm's (the library default: oneDNN's sgemm where built with it).
  const double tg = best_of(reps, [&] {
    gemm::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, ref.data(), n, gemm::Library::openblas);
  });
  const double tb = best_of(reps, [&] {
    gemm::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, ref.data(), n);
  });
  const double to = best_of(reps, [&] {
    op::matmul({op::Combine::mul, op::Reduce::sum}, false, false, n, n, n, a.data(), n, b.data(), n, c.data(), n,
               false);
  });
  std::printf("\n(sum, a*b): op::matmul %.2f GFLOP/s; gemm::gemm on OpenBLAS %.2f (time ratio %.3f); blas.gemm's "
              "%s %.2f (time ratio %.3f)\n",
              ops / to / 1e9, ops / tg / 1e9, to / tg, gemm::sgemm_library().c_str(), ops / tb / 1e9, to / tb);
  // The generic path (a mul program run over blocks of 64 columns) against the fast kernels.
  {
    const auto slow_max = op::ElementProgram::compile("(a) + (b) * 1", {"a", "b"});
    const auto relu = op::ElementProgram::compile("a*relu(b)", {"a", "b"});
    const double tf = best_of(reps, [&] {
      op::matmul({op::Combine::add, op::Reduce::max}, false, false, n, n, n, a.data(), n, b.data(), n, c.data(), n,
                 false);
    });
    const double tp = best_of(std::max(1, reps / 2), [&] {
      op::matmul_program(slow_max, op::Reduce::max, false, false, n, n, n, a.data(), n, b.data(), n, c.data(), n,
                         false);
    });
    const double tr = best_of(std::max(1, reps / 2), [&] {
      op::matmul_program(relu, op::Reduce::sum, false, false, n, n, n, a.data(), n, b.data(), n, c.data(), n, false);
    });
    std::printf("\ngeneric mul programs: (max, (a)+(b)*1) %.2f GOP/s (the (max, +) kernel: %.2f, %.1fx the time); "
                "(sum, a*relu(b)) %.2f GOP/s\n",
                ops / tp / 1e9, ops / tf / 1e9, tp / tf, ops / tr / 1e9);
  }
  // A causal output mask (attention's): the masked 128 x 128 blocks skipped.
  {
    std::vector<std::int8_t> causal(size_t(n * n));
    for (int64_t i = 0; i < n; ++i)
      for (int64_t j = 0; j < n; ++j) causal[size_t(i * n + j)] = j <= i;
    std::printf("\ncausal output mask, n = %lld:\n", (long long)n);
    for (auto [pair, s] : {std::pair{"(sum, a*b)", op::Semiring{op::Combine::mul, op::Reduce::sum}},
                           std::pair{"(lse, +)", op::Semiring{op::Combine::add, op::Reduce::logsumexp}}}) {
      const double full = best_of(reps, [&] {
        op::matmul(s, false, false, n, n, n, a.data(), n, b.data(), n, c.data(), n, false);
      });
      const double half = best_of(reps, [&] {
        op::matmul_masked(s, false, false, n, n, n, a.data(), n, b.data(), n, c.data(), n, false,
                          op::Mask{causal.data(), 0, n, {}});
      });
      std::printf("  %-10s unmasked %8.2f ms, masked %8.2f ms: %.2fx the time\n", pair, full * 1e3, half * 1e3,
                  half / full);
    }
  }
  // A ReLU MLP's second product: H (m x h, a fraction z of zeros, as relu leaves) times W2 (h x d), dense
  // (the GEMM) against skip_zeros (H's nonzeros only).
  const int64_t m = n, h = 4 * n, dd = n;
  std::vector<float> hid(size_t(m * h)), w2(size_t(h * dd)), y(size_t(m * dd)), y2(size_t(m * dd));
  for (float& x : w2) x = d(gen);
  std::uniform_real_distribution<float> u(0, 1);
  std::printf("\nReLU-masked product H (%lld x %lld) W2 (%lld x %lld), one thread:\n", (long long)m, (long long)h,
              (long long)h, (long long)dd);
  std::printf("%8s %12s %12s %14s %10s\n", "zeros", "dense ms", "skip ms", "skip GFLOP", "speedup");
  for (double z : {0.5, 0.9, 0.99}) {
    int64_t nnz = 0;
    for (float& x : hid) {
      x = u(gen) < z ? 0.0f : u(gen);
      nnz += x != 0;
    }
    const double td = best_of(reps, [&] {
      gemm::gemm(false, false, m, dd, h, 1.0f, hid.data(), h, w2.data(), dd, 0.0f, y.data(), dd);
    });
    const double ts = best_of(reps, [&] {
      op::matmul_skip_zeros(m, dd, h, hid.data(), h, w2.data(), dd, y2.data(), dd, false);
    });
    double err = 0, big = 0;
    for (size_t e = 0; e < y.size(); ++e) {
      err = std::max(err, double(std::abs(y[e] - y2[e])));
      big = std::max(big, double(std::abs(y[e])));
    }
    std::printf("%7.0f%% %12.2f %12.2f %14.2f %9.2fx   (max difference %.1e of the largest)\n", 100 * z, td * 1e3,
                ts * 1e3, 2.0 * double(nnz) * double(dd) / 1e9, td / ts, err / big);
  }
  return 0;
}
