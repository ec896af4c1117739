// Sparse linear kernels vs OpenBLAS sgemm on GPT-2 124M layer shapes.
//
// y[M, n] = x[M, k] · Wᵀ with W [n, k]: dense cblas_sgemm (and cblas_sgemv at
// M = 1, the faster dense path there) against sparse::linear on CSR at several
// sparsities, BSR (bs 16, 90% of the blocks zero) and 2:4. At M < 8 the CSR
// columns run on a plan (sparse::plan_gemv, built once per weight and not
// timed; its build time and size are printed after the table) and one more
// column times the CSR kernel without it (M < 4: the gathering GEMV; 4..7: the
// blocked kernel) at the sparsity nearest 90%. Our timings include
// the activation layout conversion (the kernels take and return row-major x
// and y). 1 and 2 threads: OpenBLAS with openblas_set_num_threads, ours by
// splitting the output features N in two row slices, one per thread (a
// persistent worker thread, so no thread start-up per call). All methods of
// one configuration are timed in interleaved rounds (robust to load drifts);
// each timed call follows a warm call of the same method, so its weights are
// in cache; with --cold the caches are flushed (64 MiB written) before each
// timed call instead, as when a model's weights stream from memory (decoding
// one token at a time). Prints medians and speed-ups (dense / sparse).
//
//   OPENBLAS_CORETYPE=SkylakeX ymlopt_bench_sparse                 # full table
//   ymlopt_bench_sparse --shapes 768x768 --m 1,16 --threads 1 --min-time 0.01   # quick
//   OPENBLAS_CORETYPE=SkylakeX ymlopt_bench_sparse --m 1 --cold    # weights from memory
#include <cblas.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "sparse/sparse_linear.hpp"

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_corename(void);
}

namespace {

using std::int64_t;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// "--name value" options; comma-separated lists.
struct Opts {
  std::vector<std::string> a;
  std::string str(const char* name, const std::string& def) const {
    for (std::size_t i = 0; i + 1 < a.size(); ++i)
      if (a[i] == name) return a[i + 1];
    return def;
  }
  std::vector<std::string> list(const char* name, const std::string& def) const {
    std::vector<std::string> out;
    const std::string s = str(name, def);
    std::size_t p = 0;
    while (p <= s.size()) {
      const std::size_t q = std::min(s.find(',', p), s.size());
      if (q > p) out.push_back(s.substr(p, q - p));
      p = q + 1;
    }
    return out;
  }
};

/// One persistent helper thread: run(f0, f1) runs f1 on the helper and f0 on the
/// caller, and returns when both are done. The helper spins for ~50 us after a
/// job before blocking, so back-to-back calls do not pay a futex wake-up.
class Pair {
 public:
  Pair() : th_([this] { loop(); }) {}
  ~Pair() {
    stop_.store(true);
    {
      std::lock_guard<std::mutex> l(mu_);
      gen_.fetch_add(1);
    }
    cv_.notify_one();
    th_.join();
  }
  void run(const std::function<void()>& f0, const std::function<void()>& f1) {
    job_ = &f1;
    done_.store(false, std::memory_order_relaxed);
    {
      std::lock_guard<std::mutex> l(mu_);
      gen_.fetch_add(1, std::memory_order_release);
    }
    cv_.notify_one();
    f0();
    while (!done_.load(std::memory_order_acquire)) _mm_pause();
  }

 private:
  void loop() {
    std::uint64_t seen = 0;
    for (;;) {
      std::uint64_t g = gen_.load(std::memory_order_acquire);
      const double until = now_s() + 50e-6;
      while (g == seen && now_s() < until) {
        _mm_pause();  // a spin, not sched_yield: a syscall per poll added microseconds to each hand-off
        g = gen_.load(std::memory_order_acquire);
      }
      if (g == seen) {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return gen_.load() != seen; });
        g = gen_.load();
      }
      seen = g;
      if (stop_.load()) return;
      (*job_)();
      done_.store(true, std::memory_order_release);
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::atomic<std::uint64_t> gen_{0};
  std::atomic<bool> stop_{false};
  const std::function<void()>* job_ = nullptr;
  std::atomic<bool> done_{true};
  std::thread th_;
};

/// Median seconds of each of `fs`, measured in interleaved rounds (every
/// function once per round) so that all of them see the same machine load;
/// rounds continue until about min_time per function has passed (5 to 400).
/// Each timed call follows an untimed call of the same function, so every
/// method finds its own weights in cache (the previous functions of the round
/// have evicted them; without the warm call a method would be timed hot or
/// cold depending on whether the one before it in the round shares its data,
/// as sgemm and sgemv do). `cold`: every timed call follows a cache flush, then
/// `wake` (which gets our helper thread out of its futex wait, as OpenBLAS's
/// threads, spinning, already are).
std::vector<double> time_all(const std::vector<std::function<void()>>& fs, double min_time, bool cold,
                             const std::function<void()>& wake) {
  static std::vector<char> flush(64 << 20);
  std::vector<std::vector<double>> ts(fs.size());
  const double start = now_s();
  for (int r = 0; r < 400; ++r) {
    for (std::size_t i = 0; i < fs.size(); ++i) {
      if (cold) {
        if (r == 0) fs[i]();  // first-call costs (scratch buffers, thread pools)
        std::memset(flush.data(), r + static_cast<int>(i), flush.size());
        wake();
      } else {
        fs[i]();
      }
      const double a = now_s();
      fs[i]();
      ts[i].push_back(now_s() - a);
    }
    if (r >= 4 && now_s() - start >= 2 * min_time * static_cast<double>(fs.size())) break;
  }
  std::vector<double> med;
  for (auto& t : ts) med.push_back(median(t));
  return med;
}

/// Dense W [n, k] with a random fraction `zero_frac` of zeros.
std::vector<float> unstructured(int64_t n, int64_t k, double zero_frac, std::mt19937& gen) {
  std::uniform_real_distribution<float> v(-1, 1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> w(static_cast<std::size_t>(n * k));
  for (float& x : w) x = u(gen) < zero_frac ? 0.0f : v(gen);
  return w;
}

std::vector<float> blocky(int64_t n, int64_t k, int64_t bs, double zero_frac, std::mt19937& gen) {
  std::uniform_real_distribution<float> v(-1, 1);
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<float> w(static_cast<std::size_t>(n * k), 0.0f);
  for (int64_t br = 0; br < n / bs; ++br)
    for (int64_t bc = 0; bc < k / bs; ++bc)
      if (u(gen) >= zero_frac)
        for (int64_t r = 0; r < bs; ++r)
          for (int64_t c = 0; c < bs; ++c) w[(br * bs + r) * k + bc * bs + c] = v(gen);
  return w;
}

std::vector<float> two_four(int64_t n, int64_t k, std::mt19937& gen) {
  std::uniform_real_distribution<float> v(-1, 1);
  std::vector<float> w(static_cast<std::size_t>(n * k), 0.0f);
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k / 4; ++g) {
      const int a = static_cast<int>(gen() % 4);
      int b = static_cast<int>(gen() % 3);
      if (b >= a) ++b;
      w[r * k + 4 * g + a] = v(gen);
      w[r * k + 4 * g + b] = v(gen);
    }
  return w;
}

/// max |y - ref| / max |ref| over the [m, n] outputs.
double rel_err(const std::vector<float>& y, const std::vector<float>& ref) {
  double e = 0, s = 0;
  for (std::size_t i = 0; i < y.size(); ++i) {
    e = std::max(e, double(std::abs(y[i] - ref[i])));
    s = std::max(s, double(std::abs(ref[i])));
  }
  return s > 0 ? e / s : e;
}

void dense_ref(const std::vector<float>& x, int64_t m, const std::vector<float>& w, int64_t n, int64_t k,
               std::vector<float>& y) {
  openblas_set_num_threads(1);
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0f, x.data(), int(k), w.data(),
              int(k), 0.0f, y.data(), int(n));
}

/// The command line's settings.
struct Config {
  bool cold = false;
  std::vector<std::string> shapes, ms, threads, sparsities;
  double min_time = 0.3, bsr_zero = 0.9;
  int64_t bsr_bs = 16;
  std::size_t near90 = 0;  // the sparsity nearest 90%: its CSR kernel without a plan gets a column at M < 8
};

/// Every weight format of one k x n shape, and the CSR GEMV plans: whole, and
/// the two row slices [0, h) and [h, n) of the 2-thread runs.
struct Weights {
  int64_t k = 0, n = 0, h = 0;
  std::vector<float> wd, wbsr, w24;
  std::vector<std::vector<float>> wcsr;
  std::vector<ymlopt::sparse::Csr> csr;
  ymlopt::sparse::Bsr bsr;
  ymlopt::sparse::Nm24 nm;
  std::vector<ymlopt::sparse::CsrPlan> plan, plan0, plan1;
};

/// Builds the formats of one shape; appends the plans' build-time lines to notes.
Weights make_weights(int64_t k, int64_t n, const Config& c, std::mt19937& gen, std::string& notes) {
  using namespace ymlopt;
  Weights w;
  w.k = k;
  w.n = n;
  w.wd = unstructured(n, k, 0.0, gen);
  for (const auto& s : c.sparsities) {
    w.wcsr.push_back(unstructured(n, k, std::atof(s.c_str()), gen));
    w.csr.push_back(sparse::to_csr(w.wcsr.back().data(), n, k, k));
  }
  w.wbsr = blocky(n, k, c.bsr_bs, c.bsr_zero, gen);
  w.bsr = sparse::to_bsr(w.wbsr.data(), n, k, k, c.bsr_bs);
  w.w24 = two_four(n, k, gen);
  w.nm = sparse::to_nm24(w.w24.data(), n, k, k);
  const int64_t al = std::max<int64_t>(16, c.bsr_bs);  // whole BSR blocks, 4-row kernel groups
  w.h = n / 2 / al * al;
  for (std::size_t i = 0; i < w.csr.size(); ++i) {
    std::vector<double> build;
    for (int r = 0; r < 5; ++r) {
      const double t0 = now_s();
      w.plan.push_back(sparse::plan_gemv(w.csr[i].view()));
      build.push_back(now_s() - t0);
      if (r < 4) w.plan.pop_back();
    }
    w.plan0.push_back(sparse::plan_gemv(w.csr[i].view().rows(0, w.h)));
    w.plan1.push_back(sparse::plan_gemv(w.csr[i].view().rows(w.h, n)));
    const double csr_bytes = 8.0 * static_cast<double>(w.csr[i].values.size()) + 4.0 * static_cast<double>(n + 1);
    char line[200];
    std::snprintf(line, sizeof line, "| %ldx%ld | CSR %.0f%% | %.3f | %.2f | %.2f |\n", static_cast<long>(k),
                  static_cast<long>(n), std::atof(c.sparsities[i].c_str()) * 100, median(build) * 1e3,
                  static_cast<double>(w.plan.back().bytes()) / csr_bytes,
                  static_cast<double>(w.plan.back().nnz) /
                      static_cast<double>(std::max<std::size_t>(w.plan.back().values.size(), 1)));
    notes += line;
  }
  return w;
}

/// Times dense and every sparse format on M tokens for each thread count, one
/// table row each, after checking every format against sgemm (1 thread).
void bench_m(const Config& c, const Weights& w, int64_t m, Pair& pair, std::mt19937& gen) {
  using namespace ymlopt;
  const int64_t k = w.k, n = w.n, h = w.h;
  std::vector<float> x(static_cast<std::size_t>(m * k)), y(static_cast<std::size_t>(m * n)), ref(y.size());
  std::uniform_real_distribution<float> xv(-1, 1);
  for (float& v : x) v = xv(gen);

  double err = 0;
  auto check = [&](const std::vector<float>& wf, auto&& run) {
    dense_ref(x, m, wf, n, k, ref);
    run();
    err = std::max(err, rel_err(y, ref));
  };
  const bool planned = m < sparse::kCsrPlanMaxM;  // sparse::linear runs a given plan below 8 tokens
  for (std::size_t i = 0; i < w.csr.size(); ++i) {
    check(w.wcsr[i], [&] { sparse::linear(x.data(), m, k, w.csr[i].view(), y.data(), n); });
    if (planned) check(w.wcsr[i], [&] { sparse::linear(x.data(), m, k, w.csr[i].view(), y.data(), n, &w.plan[i]); });
  }
  check(w.wbsr, [&] { sparse::linear(x.data(), m, k, w.bsr.view(), y.data(), n); });
  check(w.w24, [&] { sparse::linear(x.data(), m, k, w.nm.view(), y.data(), n); });

  for (const auto& tstr : c.threads) {
    const int nt = std::atoi(tstr.c_str());
    std::vector<std::function<void()>> fs;
    fs.push_back([&] {
      openblas_set_num_threads(nt);
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0f, x.data(), int(k),
                  w.wd.data(), int(k), 0.0f, y.data(), int(n));
    });
    if (m == 1)
      fs.push_back([&] {
        openblas_set_num_threads(nt);
        cblas_sgemv(CblasRowMajor, CblasNoTrans, int(n), int(k), 1.0f, w.wd.data(), int(k), x.data(), 1, 0.0f,
                    y.data(), 1);
      });
    const std::size_t first_sparse = fs.size();
    // Ours: one call, or two row slices [0, h) and [h, n) on two threads.
    auto ours = [&](std::function<void(int64_t, int64_t)> slice) {
      if (nt == 1)
        fs.push_back([slice, n] { slice(0, n); });
      else
        fs.push_back([slice, h, n, &pair] { pair.run([&] { slice(0, h); }, [&] { slice(h, n); }); });
    };
    for (std::size_t i = 0; i < w.csr.size(); ++i)
      ours([&, i](int64_t a, int64_t b) {
        const sparse::CsrPlan* p = !planned           ? nullptr
                                   : a == 0 && b == n ? &w.plan[i]
                                   : a == 0           ? &w.plan0[i]
                                                      : &w.plan1[i];
        sparse::linear(x.data(), m, k, w.csr[i].view().rows(a, b), y.data() + a, n, p);
      });
    ours([&](int64_t a, int64_t b) {
      sparse::linear(x.data(), m, k, w.bsr.view().block_rows(a / c.bsr_bs, b / c.bsr_bs), y.data() + a, n);
    });
    ours([&](int64_t a, int64_t b) { sparse::linear(x.data(), m, k, w.nm.view().rows(a, b), y.data() + a, n); });
    if (planned && !w.csr.empty())
      ours([&](int64_t a, int64_t b) {
        sparse::linear(x.data(), m, k, w.csr[c.near90].view().rows(a, b), y.data() + a, n);
      });
    const std::vector<double> t = time_all(fs, c.min_time, c.cold, [&pair] { pair.run([] {}, [] {}); });
    double dense = t[0];
    for (std::size_t i = 1; i < first_sparse; ++i) dense = std::min(dense, t[i]);
    std::printf("| %ldx%ld | %ld | %d | %.4f |", static_cast<long>(k), static_cast<long>(n), static_cast<long>(m), nt,
                dense * 1e3);
    for (std::size_t i = first_sparse; i < t.size(); ++i) std::printf(" %.4f (%.2fx) |", t[i] * 1e3, dense / t[i]);
    if (!planned) std::printf(" - |");
    std::printf(" %.1e |\n", err);
    std::fflush(stdout);
  }
}

/// The command line's settings; exits 0 on --help and 2 on a bad option.
Config parse_args(int argc, char** argv) {
  Opts o{std::vector<std::string>(argv + 1, argv + argc)};
  for (std::size_t i = 0; i < o.a.size(); ++i) {
    const std::string& a = o.a[i];
    const bool valued = a == "--shapes" || a == "--m" || a == "--threads" || a == "--csr" || a == "--min-time" ||
                        a == "--bs";
    if (valued && i + 1 < o.a.size()) {
      ++i;
    } else if (a != "--cold") {
      const bool help = a == "--help" || a == "-h";
      if (!help) std::fprintf(stderr, "ymlopt_bench_sparse: unknown option or missing value: %s\n", a.c_str());
      std::fprintf(help ? stdout : stderr,
                   "usage: ymlopt_bench_sparse [--shapes KxN,...] [--m M,...] [--threads 1,2] [--csr F,...]\n"
                   "                           [--bs B] [--min-time S] [--cold]\n");
      std::exit(help ? 0 : 2);
    }
  }
  Config c;
  c.cold = std::find(o.a.begin(), o.a.end(), "--cold") != o.a.end();
  c.shapes = o.list("--shapes", "768x2304,768x768,768x3072,3072x768");
  c.ms = o.list("--m", "1,16,128,512");
  c.threads = o.list("--threads", "1,2");
  c.sparsities = o.list("--csr", "0.5,0.7,0.9,0.95");
  c.min_time = std::atof(o.str("--min-time", "0.3").c_str());
  c.bsr_bs = std::atol(o.str("--bs", "16").c_str());
  for (std::size_t i = 0; i < c.sparsities.size(); ++i)
    if (std::abs(std::atof(c.sparsities[i].c_str()) - 0.9) < std::abs(std::atof(c.sparsities[c.near90].c_str()) - 0.9))
      c.near90 = i;
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ymlopt;
  const Config c = parse_args(argc, argv);
  std::printf("# sparse linear kernels vs OpenBLAS (core %s), AVX-512 path: %s\n", openblas_get_corename(),
              sparse::avx512_available() ? "yes" : "no (portable)");
  std::printf("# y[M,n] = x[M,k] W^T, W [n,k]; ms = median; (r) = dense ms / sparse ms; dense = sgemm "
              "(M=1: min of sgemm, sgemv)\n");
  std::printf("# BSR: bs %ld, %.0f%% of blocks zero; CSR: fraction of zeros; layout conversion included\n",
              static_cast<long>(c.bsr_bs), c.bsr_zero * 100);
  std::printf("# weights %s\n\n", c.cold ? "cold (caches flushed before every timed call)" : "in cache (warm call before every timed call)");
  std::printf("| k x n | M | thr | dense ms |");
  for (const auto& s : c.sparsities) std::printf(" CSR %.0f%% |", std::atof(s.c_str()) * 100);
  const double near90_f = c.sparsities.empty() ? 0.9 : std::atof(c.sparsities[c.near90].c_str());
  std::printf(" BSR%ld 90%% | 2:4 | CSR %.0f%% no plan | max rel err |\n|---|---|---|---|", static_cast<long>(c.bsr_bs),
              near90_f * 100);
  for (std::size_t i = 0; i < c.sparsities.size() + 4; ++i) std::printf("---|");
  std::printf("\n");

  Pair pair;
  std::mt19937 gen(42);
  std::string plan_notes;  // printed after the table
  for (const auto& sh : c.shapes) {
    const int64_t k = std::atol(sh.c_str()), n = std::atol(sh.c_str() + sh.find('x') + 1);
    const Weights w = make_weights(k, n, c, gen, plan_notes);
    for (const auto& mstr : c.ms) bench_m(c, w, std::atol(mstr.c_str()), pair, gen);
  }
  std::printf(
      "\n# CSR plans (M < 8): median build ms of 5, plan bytes / CSR bytes, nonzeros / slots\n"
      "| k x n | weight | build ms | bytes ratio | slot fill |\n|---|---|---|---|---|\n%s",
      plan_notes.c_str());
  return 0;
}
