// Quantized linear (quant::linear) against OpenBLAS f32 sgemm on GPT-2 124M layer shapes.
//
//   ymlopt_bench_qlinear [--m 1,16,128,512] [--shapes 768x2304,768x768,768x3072,3072x768]
//                        [--threads 1,2] [--reps 21] [--isa best|scalar|avx2|avx512] [--formats 0123456]
//                        [--kept]
//
// --kept names the quantized weights (QWeight::q_id), so that the AVX-512 panel
// kernels pack them once (on the second call) and reuse the panels, as in a
// model run; at one thread only (the threads' row slices are not named).
//
// For each shape (k x n: x is [m, k], W is [n, k] as torch Linear) and M: sgemm
// (cblas_sgemm, B transposed; at M = 1 also sgemv) with openblas_set_num_threads(t),
// and quant::linear with int8 per channel, int4 group 128 (symmetric), q4_0 and q8_0, and
// quant::linear_weight_only on the int8 weights (activations kept f32: "int8 w-only"),
// and quant::linear_bf16 on the weights rounded to bf16 ("bf16", f32 accumulation),
// and gemm::sgemm_panels on the f32 weights packed once ("f32 panels": nn.linear's
// dense f32 product when its weight is kept packed),
// split over t persistent std::threads by output rows (QWeight::rows). Weights are quantized
// once (not timed); activation quantization is inside every timed call. Prints the
// median time of --reps calls and speed-ups over sgemm measured in the same run,
// plus the relative error of each quantized product against the f32 one. Each rep
// times sgemm and the formats back to back; the speed-up printed is the median of
// the per-rep ratios (robust on a shared machine), the times are medians.
// At one thread it also times blas.gemm's f32 GEMM (components/gemm Library::best:
// oneDNN sgemm when built with it) and prints int8's speed-up over that too.
#include <cblas.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <ymlopt/half.hpp>

#include "bench_util.hpp"
#include "gemm/gemm.hpp"
#include "gemm/sgemm_panels.hpp"
#include "quant/bf16_linear.hpp"
#include "quant/quant.hpp"

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_corename(void);
}

namespace {

using ymlopt::quant::Isa;
using ymlopt::quant::QWeight;

/// Seconds of one call of f.
template <class F>
double timed(F&& f) {
  const double t0 = bench::now_s();
  f();
  return bench::now_s() - t0;
}

/// Persistent worker threads (blocked on a futex between jobs, so that they take no
/// CPU from the sgemm timings), so that the 2-thread timings do not include thread creation.
///   Pool pool(2);  pool.run([&](int t) { ... part t ... });
class Pool {
 public:
  explicit Pool(int threads) {
    for (int t = 1; t < threads; ++t)
      workers_.emplace_back([this, t] {
        long seen = 0;
        for (;;) {
          epoch_.wait(seen, std::memory_order_acquire);
          seen = epoch_.load(std::memory_order_acquire);
          if (stop_) return;
          (*job_)(t);
          done_.fetch_add(1, std::memory_order_acq_rel);
          done_.notify_all();
        }
      });
  }
  ~Pool() {
    stop_ = true;
    epoch_.fetch_add(1, std::memory_order_acq_rel);
    epoch_.notify_all();
    for (auto& w : workers_) w.join();
  }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;
  int size() const { return static_cast<int>(workers_.size()) + 1; }
  /// Runs f(0) here and f(1..size-1) on the workers; returns when all are done.
  void run(const std::function<void(int)>& f) {
    job_ = &f;
    done_.store(0, std::memory_order_relaxed);
    epoch_.fetch_add(1, std::memory_order_acq_rel);
    epoch_.notify_all();
    f(0);
    for (int d; (d = done_.load(std::memory_order_acquire)) != size() - 1;) done_.wait(d, std::memory_order_acquire);
  }

 private:
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<long> epoch_{0};
  std::atomic<int> done_{0};
  std::atomic<bool> stop_{false};
};

/// y = x W^T with W split by output rows over the pool's threads.
void qlinear_mt(const float* x, long m, long k, const QWeight& w, float* y, Pool& pool, Isa isa, bool weight_only) {
  auto one = [&](const QWeight& part, float* out) {
    if (weight_only)
      ymlopt::quant::linear_weight_only(x, m, k, part, out, w.n);
    else
      ymlopt::quant::linear(x, m, k, part, out, w.n, isa);
  };
  if (pool.size() <= 1) {
    one(w, y);
    return;
  }
  const long n = w.n, parts = pool.size();
  pool.run([&](int t) {
    // split on multiples of 16 rows so that every part keeps full micro-kernel tiles
    const long n0 = (n * t / parts) / 16 * 16, n1 = t + 1 == parts ? n : (n * (t + 1) / parts) / 16 * 16;
    one(w.rows(n0, n1), y + n0);
  });
}

/// y = bf16(x) W^T (W bf16 [n, k]) split like qlinear_mt.
void bf16_mt(const float* x, long m, long k, const std::uint16_t* w, long n, float* y, Pool& pool) {
  const long parts = pool.size();
  pool.run([&](int t) {
    const long n0 = (n * t / parts) / 16 * 16, n1 = t + 1 == parts ? n : (n * (t + 1) / parts) / 16 * 16;
    ymlopt::quant::linear_bf16(x, m, k, w + n0 * k, n1 - n0, k, k, y + n0, n);
  });
}

void panels_mt(const float* x, long m, long k, const float* panels, long n, float* y, Pool& pool) {
  const long parts = pool.size();
  pool.run([&](int t) {  // whole panels per thread
    const long p = (n + 31) / 32, n0 = p * t / parts * 32, n1 = std::min(n, p * (t + 1) / parts * 32);
    if (n1 > n0) ymlopt::gemm::sgemm_panels(false, m, n1 - n0, k, 1.0f, x, k, panels + n0 * k, 0.0f, y + n0, n);
  });
}

double rel_err(const std::vector<float>& a, const std::vector<float>& ref) {
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    num += (double(a[i]) - ref[i]) * (double(a[i]) - ref[i]);
    den += double(ref[i]) * ref[i];
  }
  return std::sqrt(num / std::max(den, 1e-300));
}

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv);
  const int reps = static_cast<int>(args.num("--reps", 21));
  // 0 int8, 1 int4-g128, 2 q4_0, 3 int8 weight-only, 4 q8_0, 5 bf16, 6 f32 panels
  const std::string formats = args.str("--formats", "0123456");
  const bool kept = args.has("--kept");
  const std::string isa_name = args.str("--isa", "best");  // best, scalar, avx2, avx512
  const Isa isa = isa_name == "scalar" ? Isa::scalar
                  : isa_name == "avx2" ? Isa::avx2
                  : isa_name == "avx512" ? Isa::avx512_vnni
                                         : Isa::best;
  std::vector<long> ms, threads;
  for (const auto& s : args.list("--m", "1,16,128,512")) ms.push_back(std::stol(s));
  for (const auto& s : args.list("--threads", "1,2")) threads.push_back(std::stol(s));
  std::vector<std::pair<long, long>> shapes;
  for (const auto& s : args.list("--shapes", "768x2304,768x768,768x3072,3072x768")) {
    const auto x = s.find('x');
    shapes.emplace_back(std::stol(s.substr(0, x)), std::stol(s.substr(x + 1)));
  }
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("ymlopt_bench_qlinear: reps=%d (median), isa=%s, cpu: %s\n", reps,
              isa == Isa::best ? ymlopt::quant::best_isa_name() : isa_name.c_str(),
              bench::cpu_model().c_str());
  std::printf("bf16 path: %s; f32 panels: %s\n", ymlopt::quant::bf16_best_isa_name(), ymlopt::gemm::sgemm_panels_isa_name());
  std::printf("openblas: corename=%s OPENBLAS_CORETYPE=%s\n", openblas_get_corename(), coretype ? coretype : "(unset)");
  std::printf("task f32 column: blas.gemm's f32 GEMM at 1 thread, %s (nn.linear's dense f32 path is the sgemm column)\n",
              ymlopt::gemm::sgemm_library().c_str());
  std::printf("%-10s %5s %3s %10s %10s %16s %16s %16s %16s %16s %16s %16s %18s   %s\n", "k x n", "M", "thr",
              "sgemm ms", "sgemv ms", "int8 ms (x)", "int4g128 ms (x)", "q4_0 ms (x)", "int8 w-only (x)", "q8_0 ms (x)",
              "bf16 ms (x)", "f32 panels (x)", "task f32 ms (int8x)",
              "rel.err int8/int4g128/q4_0/int8 w-only/q8_0/bf16/f32 panels");

  std::mt19937 gen(42);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::uint64_t id_base = 0;  // --kept: distinct ids per shape and M
  for (const auto& [k, n] : shapes) {
    std::vector<float> w(static_cast<std::size_t>(n * k));
    for (float& v : w) v = 0.02f * nd(gen);
    const auto q8 = ymlopt::quant::quantize_int8(w.data(), n, k, k);
    const auto q4 = ymlopt::quant::quantize_group(w.data(), n, k, k, 4, 128, true);
    const auto q40 = ymlopt::quant::quantize_q4_0(w.data(), n, k, k);
    const auto q80 = ymlopt::quant::quantize_q8_0(w.data(), n, k, k);
    std::vector<std::uint16_t> wb(w.size());
    for (std::size_t i = 0; i < w.size(); ++i) wb[i] = ymlopt::half::bf16_bits_from_float(w[i]);
    std::vector<float> panels(static_cast<std::size_t>(ymlopt::gemm::panel_floats(n, k)));
    ymlopt::gemm::pack_panels(w.data(), true, n, k, k, panels.data());
    for (long m : ms) {
      std::vector<float> x(static_cast<std::size_t>(m * k)), y(static_cast<std::size_t>(m * n)), yq(y.size());
      for (float& v : x) v = nd(gen);
      for (long t : threads) {
        openblas_set_num_threads(static_cast<int>(t));
        Pool pool(static_cast<int>(t));
        constexpr int F = 7;
        QWeight views[F] = {q8.view(), q4.view(), q40.view(), q8.view(), q80.view(), q8.view(), q8.view()};
        if (kept)  // named weights: the panel kernels keep them packed (from the second call)
          for (int v = 0; v < F; ++v) {
            views[v].q_id = (std::uint64_t(1) << 32) + id_base + std::uint64_t(2 * v);
            views[v].scale_id = views[v].q_id + 1;
          }
        id_base += 100;
        auto run_format = [&](int v) {
          if (v == 5) bf16_mt(x.data(), m, k, wb.data(), n, yq.data(), pool);
          else if (v == 6) panels_mt(x.data(), m, k, panels.data(), n, yq.data(), pool);
          else qlinear_mt(x.data(), m, k, views[v], yq.data(), pool, isa, v == 3);
        };
        auto sgemm = [&] {
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0f, x.data(), int(k), w.data(),
                      int(k), 0.0f, y.data(), int(n));
        };
        auto task_f32 = [&] {
          ymlopt::gemm::gemm(false, true, m, n, k, 1.0f, x.data(), k, w.data(), k, 0.0f, y.data(), n);
        };
        auto sgemv = [&] {
          cblas_sgemv(CblasRowMajor, CblasNoTrans, int(n), int(k), 1.0f, w.data(), int(k), x.data(), 1, 0.0f, y.data(),
                      1);
        };
        // Interleaved: every rep times sgemm and then each format back to back, so that the
        // ratios compare calls made under the same load (this machine is shared).
        std::vector<double> ts, tv, tqs[F], ratio[F], tf, ratio_f;
        double err[F] = {0, 0, 0, 0, 0, 0, 0};
        for (int r = -1; r < reps; ++r) {
          const double s0 = timed(sgemm), v0 = m == 1 ? timed(sgemv) : 0, f0 = t == 1 ? timed(task_f32) : 0;
          for (int v = 0; v < F; ++v) {
            if (formats.find(std::to_string(v)) == std::string::npos) continue;
            const double q = timed([&] { run_format(v); });
            if (r < 0) continue;  // warm-up
            tqs[v].push_back(q);
            ratio[v].push_back(s0 / q);
            if (v == 0 && t == 1) ratio_f.push_back(f0 / q);
          }
          if (r >= 0 && t == 1) tf.push_back(f0);
          if (r < 0) continue;
          ts.push_back(s0);
          tv.push_back(v0);
        }
        sgemm();
        for (int v = 0; v < F; ++v) {
          if (formats.find(std::to_string(v)) == std::string::npos) continue;
          run_format(v);
          err[v] = rel_err(yq, y);
        }
        const double t_sgemm = bench::median(ts), t_sgemv = bench::median(tv);
        double tq[F];
        for (int v = 0; v < F; ++v) tq[v] = bench::median(tqs[v]);
        // a format not run (--formats) prints "-", not a time
        char c[F][40], e[F][16];
        for (int v = 0; v < F; ++v) {
          if (tqs[v].empty()) {
            std::snprintf(c[v], sizeof c[v], "-");
            std::snprintf(e[v], sizeof e[v], "-");
            continue;
          }
          std::snprintf(c[v], sizeof c[v], "%.3f (%.2fx)", tq[v] * 1e3, bench::median(ratio[v]));
          std::snprintf(e[v], sizeof e[v], v == 6 ? "%.1e" : "%.4f", err[v]);
        }
        char gv[16] = "-", fc[40] = "-";
        if (m == 1) std::snprintf(gv, sizeof gv, "%.3f", t_sgemv * 1e3);
        if (!tf.empty() && !ratio_f.empty())
          std::snprintf(fc, sizeof fc, "%.3f (%.2fx)", bench::median(tf) * 1e3, bench::median(ratio_f));
        else if (!tf.empty())
          std::snprintf(fc, sizeof fc, "%.3f", bench::median(tf) * 1e3);
        std::printf("%4ldx%-5ld %5ld %3ld %10.3f %10s %16s %16s %16s %16s %16s %16s %16s %18s   %s/%s/%s/%s/%s/%s/%s\n", k,
                    n, m, t, t_sgemm * 1e3, gv, c[0], c[1], c[2], c[3], c[4], c[5], c[6], fc, e[0], e[1], e[2], e[3],
                    e[4], e[5], e[6]);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
