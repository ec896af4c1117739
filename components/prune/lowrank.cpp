// Low-rank factorization (CPU, f32/f64 ports, LAPACK dgesdd in double):
//
//   prune.lowrank  w [p,q] -> a [p,r], b [r,q] with w ≈ a·b (truncated SVD,
//                  optimal in Frobenius norm by Eckart–Young). The stored matrix
//                  is factored as given: for a torch Linear w [n,k], y = x wᵀ ≈
//                  (x bᵀ) aᵀ; for a Conv1D w [k,n], y = x w ≈ (x a) b.
//                  split=left: a = U_r Σ_r, b = V_rᵀ; split=balanced:
//                  a = U_r Σ_r^½, b = Σ_r^½ V_rᵀ. Reports the kept energy
//                  fraction and the Frobenius error sqrt(sum of discarded σ²).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "prune/prune.hpp"
#include "prune/prune_api.hpp"
#include "prune/prune_util.hpp"

namespace ymlopt {
namespace prune {

namespace pu = prune_util;
using std::int64_t;

namespace {

/// Thin SVD of a dense row-major n x k copy (destroyed): u [n, mn], s [mn], vt [mn, k].
/// jobz 'N' computes the singular values only.
void svd(std::vector<double>& a, int64_t n, int64_t k, bool vectors, std::vector<double>& u, std::vector<double>& s,
         std::vector<double>& vt) {
  const int64_t mn = std::min(n, k);
  s.assign(static_cast<std::size_t>(mn), 0.0);
  if (mn == 0) return;
  if (vectors) {
    u.assign(static_cast<std::size_t>(n * mn), 0.0);
    vt.assign(static_cast<std::size_t>(mn * k), 0.0);
  } else {
    u.assign(1, 0.0);
    vt.assign(1, 0.0);
  }
  const lapack_int info = LAPACKE_dgesdd(LAPACK_ROW_MAJOR, vectors ? 'S' : 'N', static_cast<lapack_int>(n),
                                         static_cast<lapack_int>(k), a.data(), static_cast<lapack_int>(k), s.data(),
                                         u.data(), static_cast<lapack_int>(vectors ? mn : 1), vt.data(),
                                         static_cast<lapack_int>(k));  // row-major LAPACKE wants ldvt >= k even for 'N
  if (info != 0) throw KernelError("dgesdd failed (info " + std::to_string(info) + ")");
}

template <class T> std::vector<double> dense(const T* w, int64_t n, int64_t k, int64_t ld) {
  std::vector<double> a(static_cast<std::size_t>(n * k));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t c = 0; c < k; ++c) a[static_cast<std::size_t>(r * k + c)] = static_cast<double>(w[r * ld + c]);
  return a;
}

template <class T> std::vector<double> singular_values_impl(const T* w, int64_t n, int64_t k, int64_t ld) {
  std::vector<double> a = dense(w, n, k, ld), u, s, vt;
  svd(a, n, k, false, u, s, vt);
  return s;
}

}  // namespace

std::vector<double> singular_values(const float* w, int64_t n, int64_t k, int64_t ld) {
  return singular_values_impl(w, n, k, ld);
}
std::vector<double> singular_values(const double* w, int64_t n, int64_t k, int64_t ld) {
  return singular_values_impl(w, n, k, ld);
}

std::int64_t rank_for_energy(std::span<const double> sigma, double energy) {
  if (!(energy >= 0 && energy <= 1)) throw KernelError("energy " + std::to_string(energy) + " is outside [0, 1]");
  long double total = 0;
  for (double s : sigma) total += static_cast<long double>(s) * s;
  if (total == 0 || energy == 0) return 0;
  long double acc = 0;
  for (std::size_t i = 0; i < sigma.size(); ++i) {
    acc += static_cast<long double>(sigma[i]) * sigma[i];
    // A relative slack of 1e-12 so that energy = 1 is reached despite rounding.
    if (acc >= static_cast<long double>(energy) * total * (1 - 1e-12L)) return static_cast<int64_t>(i + 1);
  }
  return static_cast<int64_t>(sigma.size());
}

std::int64_t rank_for_energy(const float* w, int64_t n, int64_t k, int64_t ld, double energy) {
  return rank_for_energy(singular_values(w, n, k, ld), energy);
}
std::int64_t rank_for_energy(const double* w, int64_t n, int64_t k, int64_t ld, double energy) {
  return rank_for_energy(singular_values(w, n, k, ld), energy);
}

LowRank truncated_svd(const double* w, int64_t n, int64_t k, int64_t ld, int64_t r, bool balanced) {
  const int64_t mn = std::min(n, k);
  if (r < 1 || r > mn)
    throw KernelError("rank " + std::to_string(r) + " must be in [1, min(n, k) = " + std::to_string(mn) + "]");
  std::vector<double> a = dense(w, n, k, ld), u, s, vt;
  svd(a, n, k, true, u, s, vt);
  LowRank f;
  f.n = n;
  f.k = k;
  f.r = r;
  f.a.resize(static_cast<std::size_t>(n * r));
  f.b.resize(static_cast<std::size_t>(r * k));
  for (int64_t j = 0; j < r; ++j) {
    const double sj = s[static_cast<std::size_t>(j)];
    const double left = balanced ? std::sqrt(sj) : sj, right = balanced ? std::sqrt(sj) : 1.0;
    for (int64_t i = 0; i < n; ++i) f.a[static_cast<std::size_t>(i * r + j)] = u[static_cast<std::size_t>(i * mn + j)] * left;
    for (int64_t c = 0; c < k; ++c) f.b[static_cast<std::size_t>(j * k + c)] = vt[static_cast<std::size_t>(j * k + c)] * right;
  }
  f.sigma = std::move(s);
  return f;
}

}  // namespace prune

namespace {

namespace pu = prune_util;
using std::int64_t;

using kutil::kFloat;

const std::vector<PortSpec>& lowrank_ports() {
  static const std::vector<PortSpec> p = {
      {"w", Access::read, kFloat, false, 2, "weight [p, q] (factored as stored)"},
      {"a", Access::write, kFloat, false, 2, "left factor [p, rank], dtype of w"},
      {"b", Access::write, kFloat, false, 2, "right factor [rank, q], dtype of w"},
  };
  return p;
}

std::string lowrank_check(const TaskShape& t) {
  const auto& s = lowrank_ports();
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  if (auto m = kutil::one_of(t.args, "split", {"left", "balanced"}); !m.empty()) return m;
  const int64_t p = t.ports[0].rows, q = t.ports[0].cols, r = t.args.get_int("rank");
  if (r < 1 || r > std::min(p, q))
    return "param 'rank' is " + std::to_string(r) + ": must be in [1, min(" + std::to_string(p) + ", " +
           std::to_string(q) + ")] for w " + kutil::dims(t.ports[0]);
  return pu::first_error({pu::expect_shape(s, t.ports, 1, p, r, "rows of w x rank"),
                          pu::expect_shape(s, t.ports, 2, r, q, "rank x columns of w"),
                          kutil::same_dtype(s, t.ports, 1, 0), kutil::same_dtype(s, t.ports, 2, 0)});
}

Cost lowrank_cost(const TaskShape& t) {
  const double p = double(t.ports[0].rows), q = double(t.ports[0].cols);
  const double mn = std::min(p, q), mx = std::max(p, q);
  Cost c = kutil::io_cost(lowrank_ports(), t, 4.0 * mn * mn * mx + 8.0 * mn * mn * mn);  // dgesdd, jobz 'S'
  c.extra_bytes = 8.0 * (p * q + p * mn + mn * q);
  return c;
}

void lowrank_cpu(KernelContext& ctx) {
  kutil::validate(ctx, lowrank_ports(), lowrank_check);
  const TensorView& wv = ctx.port(0);
  const int64_t p = wv.rows, q = wv.cols, r = ctx.arg_int("rank");
  const std::vector<double> w = pu::load(wv);
  const prune::LowRank f = prune::truncated_svd(w.data(), p, q, q, r, ctx.arg_string("split") == "balanced");
  pu::store(f.a, ctx.port(1));
  pu::store(f.b, ctx.port(2));
  long double kept = 0, dropped = 0;
  for (std::size_t i = 0; i < f.sigma.size(); ++i) {
    const long double s2 = static_cast<long double>(f.sigma[i]) * f.sigma[i];
    (static_cast<int64_t>(i) < r ? kept : dropped) += s2;
  }
  ctx.report("energy", kept + dropped > 0 ? double(kept / (kept + dropped)) : 1.0);
  ctx.report("error_fro", double(std::sqrt(dropped)));
  ctx.report("rank", double(r));
}

}  // namespace

/// Registers prune.lowrank.
///
///   <task component="prune.lowrank" w="fc1.weight" a="fc1.a" b="fc1.b" rank="64" split="balanced"/>
void register_prune_lowrank(Registry& reg) {
  kutil::add_component(reg, "prune.lowrank",
                       "truncated SVD w [p,q] ≈ a [p,rank] · b [rank,q] (Eckart–Young optimal); reports the kept "
                       "energy fraction and the Frobenius error",
                       lowrank_ports(),
                       {{"rank", ParamType::int_, "", true, "rank r, 1 <= r <= min(p, q)"},
                        {"split", ParamType::string_, "left", false,
                         "'left': a = U Σ, b = Vᵀ; 'balanced': a = U Σ^½, b = Σ^½ Vᵀ"}},
                       lowrank_cpu, lowrank_check, lowrank_cost);
}

}  // namespace ymlopt
