// Cost and quality of the prune family on transformer-sized layers, with the
// layer's own forward GEMM (OpenBLAS sgemm, Y = X Wᵀ over the m calibration
// tokens, 1 thread, measured in the same run) as the time unit:
//
//   hessian       H = 2/m XᵀX
//   obs 50%       SparseGPT-style unstructured OBS (prune::obs_prune)
//   obs 2:4       the same, 2:4 pattern
//   lowrank r     truncated SVD to rank k/4 (prune::truncated_svd)
//   refit mask    distill.layerwise mask mode on the 50%-magnitude-pruned layer (skipped above --refit-max-k)
//   refit lowrank 2 alternations on the rank-k/4 factors
//
// Quality columns: output error ||X Wᵀ - X W'ᵀ||_F relative to ||X Wᵀ||_F,
// for magnitude 50% / OBS 50% / magnitude 2:4 / OBS 2:4 / magnitude+refit /
// SVD / SVD+refit. Activations are synthetic and correlated (X = Z L with a
// random mixing L whose rows decay as 1/(1 + p/32)); weights are N(0, 1).
// Single-threaded (the engine runs one task per core): every timing uses one
// OpenBLAS thread.
//
//   ymlopt_bench_prune --shapes 768x768,3072x768,768x3072 --m 2048 --reps 3
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "prune/prune_api.hpp"

extern "C" void openblas_set_num_threads(int);
extern "C" char* openblas_get_corename(void);

namespace {

using std::int64_t;

double now_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Median seconds of `reps` calls of f.
double time_of(int reps, const std::function<void()>& f) {
  std::vector<double> t;
  for (int r = 0; r < reps; ++r) {
    const double t0 = now_s();
    f();
    t.push_back(now_s() - t0);
  }
  return median(t);
}

std::string arg(int argc, char** argv, const char* name, const std::string& def) {
  for (int i = 1; i + 1 < argc; ++i)
    if (std::string(argv[i]) == name) return argv[i + 1];
  return def;
}

std::vector<double> normal(int64_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::normal_distribution<double> d(0, 1);
  std::vector<double> v(static_cast<std::size_t>(n));
  for (double& x : v) x = d(g);
  return v;
}

/// ||X (A - B)ᵀ||_F, X [m,k], A, B [n,k].
double out_err(const std::vector<double>& x, const std::vector<double>& a, const std::vector<double>& b, int64_t m,
               int64_t n, int64_t k) {
  std::vector<double> d(a.size()), y(static_cast<std::size_t>(m * n));
  for (std::size_t i = 0; i < a.size(); ++i) d[i] = a[i] - b[i];
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0, x.data(), int(k), d.data(),
              int(k), 0.0, y.data(), int(n));
  long double s = 0;
  for (double v : y) s += static_cast<long double>(v) * v;
  return double(std::sqrt(s));
}

/// Per-row magnitude pruning: `zeros` smallest |w| of each row (group = k), or
/// N:M with `group` = M, zeros = N.
std::vector<double> magnitude(const std::vector<double>& w, int64_t n, int64_t k, int64_t group, int64_t zeros) {
  std::vector<double> out = w;
  std::vector<int64_t> idx;
  for (int64_t r = 0; r < n; ++r)
    for (int64_t g = 0; g < k; g += group) {
      idx.resize(static_cast<std::size_t>(group));
      for (int64_t j = 0; j < group; ++j) idx[j] = g + j;
      std::nth_element(idx.begin(), idx.begin() + zeros, idx.end(),
                       [&](int64_t a, int64_t b) { return std::abs(w[r * k + a]) < std::abs(w[r * k + b]); });
      for (int64_t j = 0; j < zeros; ++j) out[static_cast<std::size_t>(r * k + idx[j])] = 0;
    }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  namespace pr = ymlopt::prune;
  const std::string shapes = arg(argc, argv, "--shapes", "768x768,3072x768,768x3072");
  const int64_t m = std::atol(arg(argc, argv, "--m", "2048").c_str());
  const int reps = std::atoi(arg(argc, argv, "--reps", "3").c_str());
  const int64_t refit_max_k = std::atol(arg(argc, argv, "--refit-max-k", "1024").c_str());
  openblas_set_num_threads(1);
  std::printf("OpenBLAS core: %s (set OPENBLAS_CORETYPE=SkylakeX for the AVX-512 kernels); 1 thread; m = %lld tokens; "
              "median of %d\n",
              openblas_get_corename(), (long long)m, reps);
  std::printf("%-10s %-13s %10s %9s\n", "shape nxk", "step", "median s", "x sgemm");
  std::vector<std::string> quality;
  std::size_t pos = 0;
  while (pos < shapes.size()) {
    const std::size_t comma = std::min(shapes.find(',', pos), shapes.size());
    const std::string s = shapes.substr(pos, comma - pos);
    pos = comma + 1;
    const std::size_t xpos = s.find('x');
    const int64_t n = std::atol(s.substr(0, xpos).c_str()), k = std::atol(s.substr(xpos + 1).c_str());
    // Correlated activations and the layer.
    const std::vector<double> z = normal(m * k, 1), l0 = normal(k * k, 2), w = normal(n * k, 3);
    std::vector<double> l = l0, x(static_cast<std::size_t>(m * k));
    for (int64_t p = 0; p < k; ++p)
      for (int64_t j = 0; j < k; ++j) l[p * k + j] /= 1.0 + double(p) / 32.0;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(k), int(k), 1.0, z.data(), int(k), l.data(),
                int(k), 0.0, x.data(), int(k));
    std::vector<float> xf(x.begin(), x.end()), wf(w.begin(), w.end()), yf(static_cast<std::size_t>(m * n));
    std::vector<double> y(static_cast<std::size_t>(m * n));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0, x.data(), int(k), w.data(),
                int(k), 0.0, y.data(), int(n));
    long double ny2 = 0;
    for (double v : y) ny2 += static_cast<long double>(v) * v;
    const double ny = double(std::sqrt(ny2));

    const double t_gemm = time_of(std::max(reps, 5), [&] {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(n), int(k), 1.0f, xf.data(), int(k), wf.data(),
                  int(k), 0.0f, yf.data(), int(n));
    });
    auto row = [&](const char* step, double t) {
      std::printf("%-10s %-13s %10.4f %9.1f\n", s.c_str(), step, t, t / t_gemm);
    };
    row("sgemm fwd", t_gemm);
    std::vector<double> h;
    row("hessian", time_of(reps, [&] { h = pr::hessian(x.data(), m, k, k); }));
    pr::ObsOptions o;
    std::vector<double> w_obs, w_obs24;
    row("obs 50%", time_of(reps, [&] { w_obs = pr::obs_prune(w.data(), n, k, k, h.data(), o); }));
    pr::ObsOptions o24;
    o24.prune_n = 2;
    o24.prune_m = 4;
    row("obs 2:4", time_of(reps, [&] { w_obs24 = pr::obs_prune(w.data(), n, k, k, h.data(), o24); }));
    const int64_t r = std::max<int64_t>(1, std::min(n, k) / 4);
    pr::LowRank f;
    row("lowrank k/4", time_of(reps, [&] { f = pr::truncated_svd(w.data(), n, k, k, r, true); }));
    const std::vector<double> w_mag = magnitude(w, n, k, k, k / 2), w_mag24 = magnitude(w, n, k, 4, 2);
    std::vector<double> w_fit;
    if (k <= refit_max_k)
      row("refit mask", time_of(reps, [&] { w_fit = pr::refit(x.data(), m, k, y.data(), n, w_mag.data(), true, 1e-4); }));
    std::vector<double> a2, b2;
    row("refit lowrank", time_of(reps, [&] {
          a2 = f.a;
          b2 = f.b;
          pr::refit_lowrank(x.data(), m, k, y.data(), n, a2, b2, r, 2, 1e-4);
        }));
    std::vector<double> w_svd(static_cast<std::size_t>(n * k)), w_svd_fit(static_cast<std::size_t>(n * k));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(k), int(r), 1.0, f.a.data(), int(r), f.b.data(),
                int(k), 0.0, w_svd.data(), int(k));
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(n), int(k), int(r), 1.0, a2.data(), int(r), b2.data(),
                int(k), 0.0, w_svd_fit.data(), int(k));
    char line[512];
    std::snprintf(line, sizeof line,
                  "%-10s mag50 %.4f  obs50 %.4f (%.2fx)  mag2:4 %.4f  obs2:4 %.4f (%.2fx)  mag50+refit %s  "
                  "svd r=%lld %.4f  svd+refit %.4f",
                  s.c_str(), out_err(x, w, w_mag, m, n, k) / ny, out_err(x, w, w_obs, m, n, k) / ny,
                  out_err(x, w, w_obs, m, n, k) / out_err(x, w, w_mag, m, n, k), out_err(x, w, w_mag24, m, n, k) / ny,
                  out_err(x, w, w_obs24, m, n, k) / ny,
                  out_err(x, w, w_obs24, m, n, k) / out_err(x, w, w_mag24, m, n, k),
                  w_fit.empty() ? "skipped" : std::to_string(out_err(x, w, w_fit, m, n, k) / ny).c_str(), (long long)r,
                  out_err(x, w, w_svd, m, n, k) / ny, out_err(x, w, w_svd_fit, m, n, k) / ny);
    quality.push_back(line);
  }
  std::printf("\nrelative output error ||X Wᵀ - X W'ᵀ|| / ||X Wᵀ||:\n");
  for (const auto& q : quality) std::printf("%s\n", q.c_str());
  return 0;
}
