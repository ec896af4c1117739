// The eigensolvers of eigen.hpp: thick-restart Lanczos, explicitly and
// implicitly restarted Arnoldi, power iteration (the operators are in
// operators.cpp). Krylov bases are stored column after column (vector j at
// j*n), so BLAS sees them column-major.
#include "eigen/eigen.hpp"
#include "eigen/solver_util.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <string>

namespace ymlopt::eigen {
using namespace detail;

// ---------------------------------------------------------------- Lanczos

namespace {

/// One thick-restarted Lanczos run: the basis V (plus the residual direction
/// at column m), the projected matrix T and its Ritz pairs, cycle after cycle.
class LanczosRun {
 public:
  LanczosRun(const LinearOperator& op, const LanczosOptions& opt)
      : op_(op), opt_(opt), n_(op.n), k_(opt.k), m_(checked_subspace(op, opt)) {
    if (opt.which != Which::largest_algebraic && opt.which != Which::largest_magnitude)
      throw KernelError("lanczos: which must be largest_algebraic or largest_magnitude");
    V_.resize(sz(n_ * (m_ + 1)));
    T_.assign(sz(m_ * m_), 0.0);
    Y_.resize(sz(m_ * m_));
    theta_.resize(sz(m_));
    h_.resize(sz(m_ + 1));
    tmp_.resize(sz(m_ + 1));
    idx_.resize(sz(m_));
    std::vector<double> start = start_vector(n_, opt.start, opt.seed);
    std::copy(start.begin(), start.end(), V_.begin());
    extra_seed_ = opt.seed + 1;
  }

  EigenResult run() {
    while (true) {
      extend();
      const double anorm = ritz_pairs();
      if (opt_.full_reorth ? thick_restart(anorm) : ghost_free_restart(anorm)) return std::move(res_);
    }
  }

 private:
  static int64_t checked_subspace(const LinearOperator& op, const LanczosOptions& opt) {
    int64_t m = opt.subspace;
    check_sizes(op, opt.k, m, "lanczos");
    return m;
  }

  /// Extends the factorisation from column l to m.
  void extend() {
    for (int64_t j = l_; j < m_; ++j) {
      double* w = col(V_, n_, j + 1);
      op_.apply(col(V_, n_, j), w);
      ++res_.matvecs;
      anorm_est_ = std::max(anorm_est_, nrm2(n_, w));
      std::fill(h_.begin(), h_.end(), 0.0);
      if (opt_.full_reorth) {
        cgs2(n_, j + 1, V_.data(), w, h_.data(), tmp_.data());
      } else {
        // Three-term recurrence, plus the kept Ritz vectors of a thick restart
        // (their coupling in the first column after it; kept orthogonal after).
        for (int64_t i = 0; i <= j; ++i) {
          if (i >= l_ && i < j - 1) continue;
          const double c = cblas_ddot(bi(n_), col(V_, n_, i), 1, w, 1);
          cblas_daxpy(bi(n_), -c, col(V_, n_, i), 1, w, 1);
          h_[sz(i)] = c;
        }
      }
      for (int64_t i = 0; i <= j; ++i) {
        if (!opt_.full_reorth && i >= l_ && i < j - 1) continue;
        T_[sz(i + j * m_)] = h_[sz(i)];
        T_[sz(j + i * m_)] = h_[sz(i)];
      }
      double beta = nrm2(n_, w);
      if (beta <= 1e-13 * anorm_est_) {  // invariant subspace
        beta = 0;
        if (j + 1 < m_) random_orthogonal(n_, j + 1, V_.data(), w, extra_seed_++);
        else std::fill(w, w + n_, 0.0);
      } else {
        cblas_dscal(bi(n_), 1.0 / beta, w, 1);
      }
      if (j + 1 < m_) {
        T_[sz(j + 1 + j * m_)] = beta;
        T_[sz(j + (j + 1) * m_)] = beta;
      } else {
        beta_m_ = beta;
      }
    }
  }

  /// Orders `order` (indices into values) most wanted first.
  void sort_wanted(std::vector<int64_t>& order, const std::vector<double>& values) const {
    std::iota(order.begin(), order.end(), 0);
    if (opt_.which == Which::largest_algebraic)
      std::sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return values[sz(a)] > values[sz(b)]; });
    else
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        return std::abs(values[sz(a)]) > std::abs(values[sz(b)]);
      });
  }

  /// Ritz pairs of T, most wanted first (idx_); returns the largest |θ|.
  double ritz_pairs() {
    std::copy(T_.begin(), T_.end(), Y_.begin());
    if (LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', bi(m_), Y_.data(), bi(m_), theta_.data()) != 0)
      throw KernelError("lanczos: dsyevd failed on the projected matrix");
    sort_wanted(idx_, theta_);
    double anorm = 0;
    for (double t : theta_) anorm = std::max(anorm, std::abs(t));
    return anorm;
  }

  /// The result with the first k columns of X (n x >= k) as its vectors.
  void finish(const std::vector<double>& X) {
    res_.vectors_re.assign(X.begin(), X.begin() + static_cast<std::ptrdiff_t>(n_ * k_));
    res_.values_im.assign(sz(k_), 0.0);
  }

  /// Counts the restart and calls on_restart with the Ritz vectors X; true
  /// when it asks to stop (the result is then finished).
  bool restart_stops(const std::vector<double>& X) {
    ++res_.restarts;
    if (!opt_.on_restart) return false;
    std::vector<double> im0(sz(k_), 0.0), no_restart_vector;
    RestartState st{res_.restarts, res_.matvecs, res_.values_re, im0, res_.residuals,
                    std::span<const double>(X.data(), sz(n_ * k_)), {}, no_restart_vector, false};
    opt_.on_restart(st);
    if (st.stop) finish(X);
    return st.stop;
  }

  /// Without reorthogonalisation the basis loses orthogonality and copies
  /// ("ghosts") of converged Ritz vectors appear, so each cycle ends with a
  /// Rayleigh-Ritz step on an orthonormalised, ghost-free set of the wanted
  /// Ritz vectors (`keep` more matvecs), judged by true residuals. Returns the
  /// q orthonormal ghost-free vectors.
  std::vector<double> ghost_free_vectors(int64_t& q) const {
    const int64_t keep = std::max(k_, std::min(m_ - 1, k_ + (m_ - k_) / 2));
    const int64_t cand = std::min(m_, 2 * keep);
    std::vector<double> Yc(sz(m_ * cand)), Xc(sz(n_ * cand)), Q(sz(n_ * keep)), hq(sz(keep)), tq(sz(keep));
    for (int64_t i = 0; i < cand; ++i)
      std::copy_n(Y_.begin() + static_cast<std::ptrdiff_t>(idx_[sz(i)] * m_), m_,
                  Yc.begin() + static_cast<std::ptrdiff_t>(i * m_));
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bi(n_), bi(cand), bi(m_), 1.0, V_.data(), bi(n_),
                Yc.data(), bi(m_), 0.0, Xc.data(), bi(n_));
    q = 0;
    for (int64_t i = 0; i < cand && q < keep; ++i) {
      double* x = Xc.data() + i * n_;
      const double before = nrm2(n_, x);
      std::fill(hq.begin(), hq.end(), 0.0);
      cgs2(n_, q, Q.data(), x, hq.data(), tq.data());
      const double after = nrm2(n_, x);
      if (after > 0.5 * before && after > 0) {
        cblas_dscal(bi(n_), 1.0 / after, x, 1);
        std::copy_n(x, n_, Q.begin() + static_cast<std::ptrdiff_t>(q * n_));
        ++q;
      }
    }
    if (q < k_) throw KernelError("lanczos (reorth=none): the basis lost orthogonality; use reorth=full");
    return Q;
  }

  /// The reorth=none cycle's end: Rayleigh-Ritz on the ghost-free vectors,
  /// then a restart from them and their unconverged residuals. True when done.
  bool ghost_free_restart(double anorm) {
    int64_t q = 0;
    const std::vector<double> Q = ghost_free_vectors(q);
    std::vector<double> W(sz(n_ * q)), G(sz(q * q)), th(sz(q)), Xn(sz(n_ * q)), AXn(sz(n_ * q));
    for (int64_t i = 0; i < q; ++i) op_.apply(Q.data() + i * n_, W.data() + i * n_);
    res_.matvecs += q;
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, bi(q), bi(q), bi(n_), 1.0, Q.data(), bi(n_), W.data(),
                bi(n_), 0.0, G.data(), bi(q));
    for (int64_t i = 0; i < q; ++i)
      for (int64_t j = 0; j < i; ++j) G[sz(i + j * q)] = G[sz(j + i * q)] = 0.5 * (G[sz(i + j * q)] + G[sz(j + i * q)]);
    if (LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'U', bi(q), G.data(), bi(q), th.data()) != 0)
      throw KernelError("lanczos: dsyevd failed on the Rayleigh-Ritz matrix");
    std::vector<int64_t> ord(sz(q));
    sort_wanted(ord, th);
    std::vector<double> Z(sz(q * q)), thz(sz(q));
    for (int64_t i = 0; i < q; ++i) {
      std::copy_n(G.begin() + static_cast<std::ptrdiff_t>(ord[sz(i)] * q), q, Z.begin() + static_cast<std::ptrdiff_t>(i * q));
      thz[sz(i)] = th[sz(ord[sz(i)])];
    }
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bi(n_), bi(q), bi(q), 1.0, Q.data(), bi(n_), Z.data(),
                bi(q), 0.0, Xn.data(), bi(n_));
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bi(n_), bi(q), bi(q), 1.0, W.data(), bi(n_), Z.data(),
                bi(q), 0.0, AXn.data(), bi(n_));
    // AXn becomes the residual vectors A x - θ x.
    for (int64_t i = 0; i < q; ++i) cblas_daxpy(bi(n_), -thz[sz(i)], Xn.data() + i * n_, 1, AXn.data() + i * n_, 1);
    res_.values_re.assign(thz.begin(), thz.begin() + static_cast<std::ptrdiff_t>(k_));
    res_.residuals.assign(sz(k_), 0.0);
    int64_t nconv = 0;
    std::vector<double> next(sz(n_), 0.0);
    for (int64_t i = 0; i < k_; ++i) {
      res_.residuals[sz(i)] = nrm2(n_, AXn.data() + i * n_);
      const bool ok = is_converged(res_.residuals[sz(i)], std::abs(thz[sz(i)]), anorm, opt_.tol);
      nconv += ok ? 1 : 0;
      if (!ok) cblas_daxpy(bi(n_), 1.0, AXn.data() + i * n_, 1, next.data(), 1);
    }
    res_.converged = nconv == k_;
    if (res_.converged || res_.restarts >= opt_.max_restarts || m_ == n_) {
      finish(Xn);
      return true;
    }
    if (restart_stops(Xn)) return true;
    // Restart from [Xn, r]: r the unconverged residuals' sum, orthogonal to Xn.
    std::copy(Xn.begin(), Xn.end(), V_.begin());
    double* v = col(V_, n_, q);
    std::copy(next.begin(), next.end(), v);
    std::vector<double> hh(sz(q)), tt(sz(q));
    cgs2(n_, q, V_.data(), v, hh.data(), tt.data());
    const double nv = nrm2(n_, v);
    if (nv > 1e-10 * nrm2(n_, next.data()) && nv > 0) cblas_dscal(bi(n_), 1.0 / nv, v, 1);
    else random_orthogonal(n_, q, V_.data(), v, extra_seed_++);
    std::fill(T_.begin(), T_.end(), 0.0);
    for (int64_t i = 0; i < q; ++i) T_[sz(i + i * m_)] = thz[sz(i)];
    l_ = q;
    return false;
  }

  /// The reorth=full cycle's end: the wanted Ritz values and their residuals
  /// from T, then a thick restart [X, f] with T = [diag(θ) s; sᵀ .],
  /// s_i = beta_m * y_i(m-1). True when done.
  bool thick_restart(double anorm) {
    res_.values_re.assign(sz(k_), 0.0);
    res_.residuals.assign(sz(k_), 0.0);
    int64_t nconv = 0;
    for (int64_t i = 0; i < k_; ++i) {
      const int64_t c = idx_[sz(i)];
      res_.values_re[sz(i)] = theta_[sz(c)];
      res_.residuals[sz(i)] = std::abs(beta_m_ * Y_[sz(m_ - 1 + c * m_)]);
      nconv += is_converged(res_.residuals[sz(i)], std::abs(theta_[sz(c)]), anorm, opt_.tol) ? 1 : 0;
    }
    res_.converged = nconv == k_;
    const bool last = res_.converged || res_.restarts >= opt_.max_restarts || m_ == n_;

    // Ritz vectors of the kept set (k at the end, more on a restart).
    const int64_t keep = last ? k_ : std::min(m_ - 1, std::max(k_, k_ + (m_ - k_) / 2));
    std::vector<double> Yk(sz(m_ * keep)), X(sz(n_ * keep));
    for (int64_t i = 0; i < keep; ++i)
      std::copy_n(Y_.begin() + static_cast<std::ptrdiff_t>(idx_[sz(i)] * m_), m_,
                  Yk.begin() + static_cast<std::ptrdiff_t>(i * m_));
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bi(n_), bi(keep), bi(m_), 1.0, V_.data(), bi(n_),
                Yk.data(), bi(m_), 0.0, X.data(), bi(n_));
    if (last) {
      finish(X);
      return true;
    }
    if (restart_stops(X)) return true;
    std::copy(X.begin(), X.end(), V_.begin());
    std::copy_n(col(V_, n_, m_), n_, col(V_, n_, keep));
    std::fill(T_.begin(), T_.end(), 0.0);
    for (int64_t i = 0; i < keep; ++i) {
      const int64_t c = idx_[sz(i)];
      T_[sz(i + i * m_)] = theta_[sz(c)];
      const double s = beta_m_ * Y_[sz(m_ - 1 + c * m_)];
      T_[sz(keep + i * m_)] = s;
      T_[sz(i + keep * m_)] = s;
    }
    l_ = keep;
    return false;
  }

  const LinearOperator& op_;
  const LanczosOptions& opt_;
  const int64_t n_, k_, m_;
  std::vector<double> V_, T_, Y_, theta_, h_, tmp_;
  std::vector<int64_t> idx_;
  EigenResult res_;
  int64_t l_ = 0;  // kept (locked-in) Ritz vectors at the start of a cycle
  double beta_m_ = 0, anorm_est_ = 0;
  std::uint64_t extra_seed_ = 0;
};

}  // namespace

EigenResult lanczos(const LinearOperator& op, const LanczosOptions& opt) { return LanczosRun(op, opt).run(); }

// ---------------------------------------------------------------- Arnoldi

namespace {

/// Builds the m-step factorisation A V_m = V_m H_m + h e_mᵀ from `start`;
/// returns h = H(m, m-1) (0 on an invariant subspace).
double arnoldi_factor(const LinearOperator& op, ArnoldiBasis& w, std::span<const double> start, std::uint64_t seed,
                      int64_t& matvecs) {
  const int64_t n = w.n, m = w.m, ldh = m + 1;
  std::fill(w.H.begin(), w.H.end(), 0.0);
  std::copy(start.begin(), start.end(), w.V.begin());
  double nr = nrm2(n, w.V.data());
  if (nr == 0 || !std::isfinite(nr)) {
    const std::vector<double> r = random_vector(n, seed);
    std::copy(r.begin(), r.end(), w.V.begin());
    nr = nrm2(n, w.V.data());
  }
  cblas_dscal(bi(n), 1.0 / nr, w.V.data(), 1);
  double anorm_est = 0, last = 0;
  for (int64_t j = 0; j < m; ++j) {
    double* x = col(w.V, n, j + 1);
    op.apply(col(w.V, n, j), x);
    ++matvecs;
    anorm_est = std::max(anorm_est, nrm2(n, x));
    mgs2(n, j + 1, w.V.data(), x, w.H.data() + j * ldh);
    double h = nrm2(n, x);
    if (h <= 1e-13 * anorm_est) {
      h = 0;
      if (j + 1 < m) random_orthogonal(n, j + 1, w.V.data(), x, seed + 104729u * static_cast<std::uint64_t>(j + 1));
      else std::fill(x, x + n, 0.0);
    } else {
      cblas_dscal(bi(n), 1.0 / h, x, 1);
    }
    w.H[sz(j + 1 + j * ldh)] = h;
    last = h;
  }
  return last;
}

/// A factorisation's basis and Hessenberg matrix, read only (own memory or a span).
struct KrylovView {
  int64_t n, m;
  const double* V;
  const double* H;
  KrylovView(const ArnoldiBasis& w) : n(w.n), m(w.m), V(w.V.data()), H(w.H.data()) {}
  KrylovView(const ArnoldiSpan& s) : n(s.n), m(s.m), V(s.V), H(s.H) {}
};

/// Ritz pairs of the factorisation in `w`: the k wanted ones into `res`
/// (values, unit vectors, residual estimates).
void ritz_pairs(KrylovView w, double h_last, int64_t k, Which which, EigenResult& res, double* anorm_out,
                bool vectors = true) {
  const int64_t n = w.n, m = w.m, ldh = m + 1;
  std::vector<double> Hm(sz(m * m)), wr(sz(m)), wi(sz(m)), vr(sz(m * m));
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < m; ++i) Hm[sz(i + j * m)] = w.H[sz(i + j * ldh)];
  if (LAPACKE_dgeev(LAPACK_COL_MAJOR, 'N', 'V', bi(m), Hm.data(), bi(m), wr.data(), wi.data(), nullptr, 1, vr.data(),
                    bi(m)) != 0)
    throw KernelError("arnoldi: dgeev failed on the Hessenberg matrix");
  // The column pair holding each eigenvalue's vector: real -> (j, -), complex -> (p, p+1).
  std::vector<int64_t> first(sz(m));
  for (int64_t j = 0; j < m; ++j) first[sz(j)] = (wi[sz(j)] < 0 && j > 0) ? j - 1 : j;
  std::vector<int64_t> idx(sz(m));
  std::iota(idx.begin(), idx.end(), 0);
  auto key = [&](int64_t j) {
    return which == Which::largest_real ? wr[sz(j)] : std::hypot(wr[sz(j)], wi[sz(j)]);
  };
  std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
    const double ka = key(a), kb = key(b);
    if (ka != kb) return ka > kb;
    return wi[sz(a)] > wi[sz(b)];
  });
  double anorm = 0;
  for (int64_t j = 0; j < m; ++j) anorm = std::max(anorm, std::hypot(wr[sz(j)], wi[sz(j)]));
  *anorm_out = anorm;

  res.values_re.assign(sz(k), 0.0);
  res.values_im.assign(sz(k), 0.0);
  res.residuals.assign(sz(k), 0.0);
  std::vector<double> Yre(sz(m * k), 0.0), Yim(sz(m * k), 0.0);
  for (int64_t i = 0; i < k; ++i) {
    const int64_t j = idx[sz(i)], p = first[sz(j)];
    res.values_re[sz(i)] = wr[sz(j)];
    res.values_im[sz(i)] = wi[sz(j)];
    const double* yr = vr.data() + p * m;
    std::copy(yr, yr + m, Yre.begin() + static_cast<std::ptrdiff_t>(i * m));
    double last_sq = yr[m - 1] * yr[m - 1];
    if (wi[sz(j)] != 0) {
      const double sign = wi[sz(j)] > 0 ? 1.0 : -1.0;
      const double* yi = vr.data() + (p + 1) * m;
      for (int64_t r = 0; r < m; ++r) Yim[sz(r + i * m)] = sign * yi[r];
      last_sq += yi[m - 1] * yi[m - 1];
    }
    res.residuals[sz(i)] = std::abs(h_last) * std::sqrt(last_sq);
  }
  if (!vectors) {
    res.vectors_re.clear();
    res.vectors_im.clear();
    return;
  }
  res.vectors_re.assign(sz(n * k), 0.0);
  res.vectors_im.assign(sz(n * k), 0.0);
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bi(n), bi(k), bi(m), 1.0, w.V, bi(n), Yre.data(),
              bi(m), 0.0, res.vectors_re.data(), bi(n));
  cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bi(n), bi(k), bi(m), 1.0, w.V, bi(n), Yim.data(),
              bi(m), 0.0, res.vectors_im.data(), bi(n));
}

}  // namespace

// ---------------------------------------------------------------- implicit restart (IRAM)

void arnoldi_next(const ArnoldiSpan& s, int64_t j, double beta, std::uint64_t& seed) {
  double* v = s.V + j * s.n;
  double& h = s.H[j + (j - 1) * (s.m + 1)];
  if (beta > 0) {
    for (int64_t e = 0; e < s.n; ++e) v[e] = s.f[e] / beta;
    h = beta;
  } else {
    random_orthogonal(s.n, j, s.V, v, seed++);
    h = 0;
  }
}

/// The DGKS threshold (ARPACK's 0.717 ~ 1/sqrt 2).
constexpr double kDgks = 0.717;

double arnoldi_absorb(const ArnoldiSpan& s, int64_t j, double& anorm_est) {
  const int64_t n = s.n;
  const double wnorm = nrm2(n, s.f);
  anorm_est = std::max(anorm_est, wnorm);
  std::vector<double> h(sz(j + 1), 0.0), tmp(sz(j + 1));
  cgs_pass(n, j + 1, s.V, s.f, h.data(), tmp.data());
  double beta = nrm2(n, s.f);
  // DGKS, as ARPACK: a second pass only when the first removed most of w
  // (||f|| < ||w|| / sqrt 2), where cancellation may have left f off orthogonal.
  if (beta < kDgks * wnorm) {
    cgs_pass(n, j + 1, s.V, s.f, h.data(), tmp.data());
    beta = nrm2(n, s.f);
  }
  for (int64_t i = 0; i <= j; ++i) s.H[i + j * (s.m + 1)] = h[sz(i)];
  if (beta <= 1e-13 * anorm_est) {
    beta = 0;
    std::fill(s.f, s.f + n, 0.0);
  }
  return beta;
}

namespace {

/// H(i, j) of an (m+1) x m column-major Hessenberg store.
struct HessView {
  double* h;
  int64_t ld;
  double& operator()(int64_t i, int64_t j) const { return h[i + j * ld]; }
};

/// Extends A V_j = V_j H_j + f e_jᵀ from j0 columns to m (m - j0 matvecs):
/// arnoldi_next() makes each column from f, arnoldi_absorb() orthogonalises
/// its product. j0 = 0: column 0 of V holds the unit start vector.
void extend_factor(const LinearOperator& op, const ArnoldiSpan& s, IramState& st, int64_t j0, int64_t& matvecs) {
  for (int64_t j = j0; j < s.m; ++j) {
    if (j > 0) arnoldi_next(s, j, st.beta, st.seed);
    op.apply(s.V + j * s.n, s.f);
    ++matvecs;
    st.beta = arnoldi_absorb(s, j, st.anorm_est);
  }
}

/// A Householder reflector P = I - tau u uᵀ (u[0] = 1 implied by scaling) with
/// P x = alpha e1, for x of length 2 or 3. Returns false when x = 0 (P = I).
bool householder(const double* x, int64_t len, double* u, double& tau) {
  double nx = 0;
  for (int64_t i = 0; i < len; ++i) nx = std::hypot(nx, x[i]);
  if (nx == 0) return false;
  const double alpha = x[0] >= 0 ? -nx : nx;
  for (int64_t i = 0; i < len; ++i) u[i] = x[i];
  u[0] -= alpha;
  double uu = 0;
  for (int64_t i = 0; i < len; ++i) uu += u[i] * u[i];
  if (uu == 0) return false;
  tau = 2.0 / uu;
  return true;
}

/// One exact-shift sweep on the active block [lo, hi] of H (m x m inside an
/// (m+1)-row store), applied as a similarity to all of H and accumulated in Q
/// (m x m, column-major): a real shift as a Givens bulge chase, a complex pair
/// mu, conj(mu) (im > 0) as one Francis double-shift step (real arithmetic).
void apply_shift(HessView H, int64_t m, std::vector<double>& Q, int64_t lo, int64_t hi, double re, double im) {
  auto rows_cols = [&](int64_t r0, int64_t len, const double* u, double tau, int64_t c_from, int64_t rows_to) {
    // Left: rows r0..r0+len-1, columns c_from..m-1.
    for (int64_t j = c_from; j < m; ++j) {
      double d = 0;
      for (int64_t i = 0; i < len; ++i) d += u[i] * H(r0 + i, j);
      d *= tau;
      for (int64_t i = 0; i < len; ++i) H(r0 + i, j) -= d * u[i];
    }
    // Right: columns r0..r0+len-1, rows 0..rows_to.
    for (int64_t r = 0; r <= rows_to; ++r) {
      double d = 0;
      for (int64_t i = 0; i < len; ++i) d += H(r, r0 + i) * u[i];
      d *= tau;
      for (int64_t i = 0; i < len; ++i) H(r, r0 + i) -= d * u[i];
    }
    for (int64_t r = 0; r < m; ++r) {
      double* q = Q.data() + r;
      double d = 0;
      for (int64_t i = 0; i < len; ++i) d += q[(r0 + i) * m] * u[i];
      d *= tau;
      for (int64_t i = 0; i < len; ++i) q[(r0 + i) * m] -= d * u[i];
    }
  };
  if (im == 0) {
    double x = H(lo, lo) - re, y = H(lo + 1, lo);
    for (int64_t i = lo; i < hi; ++i) {
      if (i > lo) {
        x = H(i, i - 1);
        y = H(i + 1, i - 1);
      }
      const double r = std::hypot(x, y);
      if (r == 0) continue;
      const double c = x / r, s = y / r;
      if (i > lo) {
        H(i, i - 1) = r;
        H(i + 1, i - 1) = 0;
      }
      for (int64_t j = i; j < m; ++j) {
        const double a = H(i, j), b = H(i + 1, j);
        H(i, j) = c * a + s * b;
        H(i + 1, j) = -s * a + c * b;
      }
      for (int64_t r2 = 0; r2 <= std::min(i + 2, hi); ++r2) {
        const double a = H(r2, i), b = H(r2, i + 1);
        H(r2, i) = c * a + s * b;
        H(r2, i + 1) = -s * a + c * b;
      }
      for (int64_t r2 = 0; r2 < m; ++r2) {
        double* q = Q.data() + r2;
        const double a = q[i * m], b = q[(i + 1) * m];
        q[i * m] = c * a + s * b;
        q[(i + 1) * m] = -s * a + c * b;
      }
    }
    return;
  }
  // Francis double shift: first column of (H - mu)(H - conj mu) = H² - 2 re H + |mu|² I.
  const double s2 = 2 * re, t = re * re + im * im;
  double x[3] = {H(lo, lo) * H(lo, lo) + H(lo, lo + 1) * H(lo + 1, lo) - s2 * H(lo, lo) + t,
                 H(lo + 1, lo) * (H(lo, lo) + H(lo + 1, lo + 1) - s2),
                 lo + 2 <= hi ? H(lo + 1, lo) * H(lo + 2, lo + 1) : 0.0};
  // Exact shifts of a 2 x 2 block make x vanish up to rounding: nothing to apply.
  const double scale = std::abs(H(lo, lo)) + std::abs(H(lo + 1, lo + 1)) + std::abs(H(lo + 1, lo)) +
                       std::abs(H(lo, lo + 1));
  if (std::hypot(std::hypot(x[0], x[1]), x[2]) <= 1e-14 * (scale * scale + t) && hi == lo + 1) return;
  for (int64_t kk = lo; kk < hi; ++kk) {
    const int64_t len = std::min<int64_t>(3, hi - kk + 1);
    if (kk > lo) {
      x[0] = H(kk, kk - 1);
      x[1] = H(kk + 1, kk - 1);
      x[2] = len == 3 ? H(kk + 2, kk - 1) : 0.0;
    }
    double u[3], tau = 0;
    if (!householder(x, len, u, tau)) continue;
    rows_cols(kk, len, u, tau, kk > lo ? kk - 1 : lo, std::min(kk + 3, hi));
    if (kk > lo) {
      H(kk + 1, kk - 1) = 0;
      if (len == 3) H(kk + 2, kk - 1) = 0;
    }
  }
}

/// Sets negligible subdiagonal entries of H[0:m, 0:m] to zero (LAPACK's standard test).
void deflate(HessView H, int64_t upto) {
  constexpr double ulp = std::numeric_limits<double>::epsilon();
  const double smlnum = std::numeric_limits<double>::min() / ulp;
  for (int64_t i = 0; i + 1 < upto; ++i) {
    const double tst = std::abs(H(i, i)) + std::abs(H(i + 1, i + 1));
    if (std::abs(H(i + 1, i)) <= std::max(ulp * tst, smlnum)) H(i + 1, i) = 0;
  }
}

/// The m Ritz values of H_m, in wanted order, with their Ritz estimates |beta e_mᵀ y|.
struct AllRitz {
  std::vector<double> re, im, bound;
  std::vector<int64_t> order;
};

AllRitz all_ritz(KrylovView w, double beta, Which which) {
  const int64_t m = w.m, ldh = m + 1;
  AllRitz r;
  std::vector<double> Hm(sz(m * m)), vr(sz(m * m));
  r.re.resize(sz(m));
  r.im.resize(sz(m));
  r.bound.resize(sz(m));
  for (int64_t j = 0; j < m; ++j)
    for (int64_t i = 0; i < m; ++i) Hm[sz(i + j * m)] = w.H[sz(i + j * ldh)];
  if (LAPACKE_dgeev(LAPACK_COL_MAJOR, 'N', 'V', bi(m), Hm.data(), bi(m), r.re.data(), r.im.data(), nullptr, 1,
                    vr.data(), bi(m)) != 0)
    throw KernelError("arnoldi (implicit): dgeev failed on the Hessenberg matrix");
  for (int64_t j = 0; j < m; ++j) {
    const int64_t p = (r.im[sz(j)] < 0 && j > 0) ? j - 1 : j;
    double last = vr[sz(m - 1 + p * m)] * vr[sz(m - 1 + p * m)];
    if (r.im[sz(j)] != 0) last += vr[sz(m - 1 + (p + 1) * m)] * vr[sz(m - 1 + (p + 1) * m)];
    r.bound[sz(j)] = std::abs(beta) * std::sqrt(last);
  }
  r.order.resize(sz(m));
  std::iota(r.order.begin(), r.order.end(), 0);
  auto key = [&](int64_t j) { return which == Which::largest_real ? r.re[sz(j)] : std::hypot(r.re[sz(j)], r.im[sz(j)]); };
  std::stable_sort(r.order.begin(), r.order.end(), [&](int64_t a, int64_t b) {
    const double ka = key(a), kb = key(b);
    if (ka != kb) return ka > kb;
    return r.im[sz(a)] > r.im[sz(b)];
  });
  return r;
}

/// k' for this restart (k plus ARPACK's anti-stagnation term, kept off a
/// conjugate pair's split) from the Ritz values in wanted order.
int64_t kept_size(const AllRitz& r, int64_t k, int64_t m, int64_t nconv) {
  int64_t kk = k + std::min(nconv, (m - k) / 2);
  if (kk == 1 && m >= 6) kk = m / 2;
  else if (kk == 1 && m > 3) kk = 2;
  auto splits = [&](int64_t c) {  // the wanted set [0, c) holds one of a pair, the unwanted the other
    return c > 0 && c < m && r.im[sz(r.order[sz(c - 1)])] > 0;
  };
  if (splits(kk)) kk = kk + 1 <= m - 1 ? kk + 1 : kk - 1;
  if (splits(kk)) kk = kk - 1;  // cannot happen with exact conjugate pairs; kept safe
  return std::clamp<int64_t>(kk, 1, m - 1);
}

/// A new m-step factorisation from v (a random vector when v is zero or not
/// finite); m matvecs.
void iram_fresh(const LinearOperator& op, IramFactor& fac, std::span<const double> v, int64_t& matvecs) {
  iram_start(fac.span(), fac, v);
  extend_factor(op, fac.span(), fac, 0, matvecs);
}

/// The implicit restart: the m - kk unwanted Ritz values of `all` applied as
/// exact shifts, the factorisation truncated to kk columns in place (no matvec).
void iram_truncate(const ArnoldiSpan& s, IramState& st, const AllRitz& all, int64_t kk) {
  const int64_t n = s.n, m = s.m;
  HessView H{s.H, m + 1};
  std::vector<double> Q(sz(m * m)), h(sz(m)), tmp(sz(m));
  // Exact shifts: the m - kk unwanted Ritz values, largest Ritz estimate first
  // (Lehoucq & Sorensen: limits the forward instability of the QR sweeps); a
  // conjugate pair once, by its +im member.
  std::vector<int64_t> shifts;
  for (int64_t c = kk; c < m; ++c)
    if (all.im[sz(all.order[sz(c)])] >= 0) shifts.push_back(all.order[sz(c)]);
  std::stable_sort(shifts.begin(), shifts.end(),
                   [&](int64_t a, int64_t b) { return all.bound[sz(a)] > all.bound[sz(b)]; });
  for (int64_t i = 0; i < m; ++i) Q[sz(i + i * m)] = 1.0;
  for (int64_t sidx : shifts) {
    deflate(H, m);
    for (int64_t lo = 0; lo < m - 1;) {
      int64_t hi = lo;
      while (hi + 1 < m && H(hi + 1, hi) != 0) ++hi;
      if (hi > lo) apply_shift(H, m, Q, lo, hi, all.re[sz(sidx)], all.im[sz(sidx)]);
      lo = hi + 1;
    }
  }
  deflate(H, kk + 1);
  // V_kk <- V_m Q[:, 0:kk]; f <- V_m Q e_kk H(kk, kk-1) + f Q(m-1, kk-1), in
  // blocks of rows (a block of V Q fits in cache; nothing of size n allocated).
  const double hk = H(kk, kk - 1), qk = Q[sz(m - 1 + (kk - 1) * m)];
  constexpr int64_t kRows = 2048;
  std::vector<double> W(sz(std::min(n, kRows) * (kk + 1)));
  for (int64_t r0 = 0; r0 < n; r0 += kRows) {
    const int64_t rows = std::min(kRows, n - r0);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, bi(rows), bi(kk + 1), bi(m), 1.0, s.V + r0, bi(n),
                Q.data(), bi(m), 0.0, W.data(), bi(rows));
    for (int64_t c = 0; c < kk; ++c) std::copy_n(W.data() + c * rows, rows, s.V + c * n + r0);
    for (int64_t e = 0; e < rows; ++e) s.f[r0 + e] = W[sz(e + kk * rows)] * hk + s.f[r0 + e] * qk;
  }
  // Truncate H to kk x kk; keep f orthogonal to the kept basis (the coefficients
  // join H's last kept column, so the factorisation stays exact).
  for (int64_t j = kk; j < m; ++j)
    for (int64_t i = 0; i <= m; ++i) H(i, j) = 0;
  H(kk, kk - 1) = 0;
  cgs2(n, kk, s.V, s.f, h.data(), tmp.data());
  for (int64_t i = 0; i < kk; ++i) H(i, kk - 1) += h[sz(i)];
  st.beta = nrm2(n, s.f);
  if (st.beta <= 1e-13 * st.anorm_est) {
    st.beta = 0;
    std::fill(s.f, s.f + n, 0.0);
  }
}

/// iram_truncate(), then the factorisation extended back to m (m - kk matvecs).
void iram_shift(const LinearOperator& op, IramFactor& fac, const AllRitz& all, int64_t kk, int64_t& matvecs) {
  iram_truncate(fac.span(), fac, all, kk);
  extend_factor(op, fac.span(), fac, kk, matvecs);
}

void check_implicit(int64_t n, int64_t k, int64_t m, const char* what) {
  if (m < n && k >= m - 1)
    throw KernelError(std::string(what) + ": restart=implicit needs k < subspace - 1 (at least 2 shifts); got k = " +
                      std::to_string(k) + ", subspace = " + std::to_string(m));
}

/// Converged pairs in `res` meet check_wanted(): true when it found a more
/// wanted eigenvalue, which then replaces the least wanted pair (res.converged
/// false: the solver goes on). A check that finds no such evidence, settled or
/// inconclusive, leaves the set accepted. Counts the check's matvecs in matvecs and `checked`.
bool verify_or_swap(const LinearOperator& op, const ArnoldiOptions& opt, EigenResult& res, int64_t& matvecs,
                    int64_t& checked) {
  const WantedCheck c = check_wanted(op, res, opt.which, check_seed(opt.seed));
  checked += c.matvecs;
  res.matvecs = matvecs += c.matvecs;
  if (c.verdict == WantedCheck::Verdict::missed) {
    res = with_missed(op, res, c, opt.which);
    checked += res.matvecs - matvecs;
    matvecs = res.matvecs;
  }
  res.check_matvecs = checked;
  return c.verdict == WantedCheck::Verdict::missed;
}

/// IRAM: see Restart. m is the checked subspace size.
EigenResult iram(const LinearOperator& op, const ArnoldiOptions& opt, int64_t m) {
  const int64_t n = op.n, k = opt.k;
  check_implicit(n, k, m, "arnoldi");
  IramFactor fac(n, m, opt.seed + 1);
  int64_t matvecs = 0, restarts = 0, checked = 0;
  iram_fresh(op, fac, start_vector(n, opt.start, opt.seed), matvecs);
  EigenResult res;
  while (true) {
    double anorm = 0;
    const bool want_vectors = static_cast<bool>(opt.on_restart);
    ritz_pairs(fac.basis, fac.beta, k, opt.which, res, &anorm, false);
    const int64_t nconv = count_converged(res, k, anorm, opt.tol);
    res.converged = nconv == k;
    res.matvecs = matvecs;
    res.check_matvecs = checked;
    res.restarts = restarts;
    if ((res.converged && opt.stop_when_converged) || restarts >= opt.max_restarts || m == n) {
      ritz_pairs(fac.basis, fac.beta, k, opt.which, res, &anorm, true);
      res.converged = nconv == k;
      res.matvecs = matvecs;
      res.check_matvecs = checked;
      res.restarts = restarts;
      if (res.converged && opt.stop_when_converged && opt.verify && m < n &&
          verify_or_swap(op, opt, res, matvecs, checked) && restarts < opt.max_restarts) {
        ++restarts;
        iram_fresh(op, fac, ritz_restart_vector(res, n, false), matvecs);  // explicit, from the corrected set, every pair at full weight
        continue;
      }
      return res;
    }
    const AllRitz all = all_ritz(fac.basis, fac.beta, opt.which);
    const int64_t kk = kept_size(all, k, m, nconv);
    ++restarts;
    if (opt.on_restart) {
      if (want_vectors) ritz_pairs(fac.basis, fac.beta, k, opt.which, res, &anorm, true);
      std::vector<double> injected;  // empty: restart implicitly
      RestartState st{restarts, matvecs, res.values_re, res.values_im, res.residuals, res.vectors_re,
                      res.vectors_im, injected, false, m - kk};
      opt.on_restart(st);
      if (st.stop) {
        res.restarts = restarts;
        return res;
      }
      if (!injected.empty()) {
        if (static_cast<int64_t>(injected.size()) != n)
          throw KernelError("arnoldi: the restart callback left a vector of " + std::to_string(injected.size()) +
                            " values, expected n = " + std::to_string(n));
        iram_fresh(op, fac, injected, matvecs);  // an explicit restart from the injected vector
        continue;
      }
    }
    iram_shift(op, fac, all, kk, matvecs);
  }
}

}  // namespace

Restart parse_restart(const std::string& text) {
  if (text == "explicit") return Restart::explicit_;
  if (text == "implicit") return Restart::implicit;
  throw KernelError("restart '" + text + "': expected \"explicit\" (ERAM) or \"implicit\" (IRAM)");
}

std::vector<double> ritz_restart_vector(const EigenResult& r, int64_t n, bool weighted) {
  if (r.values_im.size() != r.values_re.size() || r.residuals.size() != r.values_re.size() ||
      r.vectors_re.size() != r.values_re.size() * sz(n) || r.vectors_im.size() != r.vectors_re.size())
    throw KernelError("ritz_restart_vector: " + std::to_string(r.values_re.size()) +
                      " values need as many imaginary parts and residuals, and n x k real and imaginary vector parts");
  std::vector<double> v(sz(n), 0.0), re_im(sz(n));
  double rmax = 0;
  for (double x : r.residuals) rmax = std::max(rmax, x);
  for (size_t i = 0; i < r.values_re.size(); ++i) {
    const double w = weighted && rmax > 0 ? std::sqrt(std::max(r.residuals[i] / rmax, 1e-6)) : 1.0;
    const double* xr = r.vectors_re.data() + i * sz(n);
    if (r.values_im[i] > 0) {
      // Re x + Im x summed first: the one real vector eigen.eram_cycle can store for
      // a +im value whose conjugate does not fit, so its restarts are bit for bit these.
      const double* xi = r.vectors_im.data() + i * sz(n);
      for (size_t e = 0; e < sz(n); ++e) re_im[e] = xr[e] + xi[e];
      xr = re_im.data();
    }
    cblas_daxpy(bi(n), w, xr, 1, v.data(), 1);
  }
  return v;
}

double relative_residual(double residual, double value_abs, double ritz_norm) {
  const double d = std::max(value_abs, arpack_floor(ritz_norm));
  return d > 0 ? residual / d : (residual == 0 ? 0 : std::numeric_limits<double>::infinity());
}

EigenResult arnoldi_cycle(const LinearOperator& op, std::span<const double> start, int64_t k, int64_t m, Which which,
                          std::uint64_t seed, double* ritz_norm) {
  check_sizes(op, k, m, "arnoldi");
  if (static_cast<int64_t>(start.size()) != op.n)
    throw KernelError("arnoldi: start vector has " + std::to_string(start.size()) + " values, expected n = " +
                      std::to_string(op.n));
  ArnoldiBasis w(op.n, m);
  EigenResult res;
  const double h = arnoldi_factor(op, w, start, seed, res.matvecs);
  double anorm = 0;
  ritz_pairs(w, h, k, which, res, &anorm);
  if (ritz_norm) *ritz_norm = anorm;
  return res;
}

IramFactor::IramFactor(int64_t n, int64_t m, std::uint64_t seed_) : basis(n, m), f(sz(n), 0.0) { seed = seed_; }

EigenResult iram_cycle(const LinearOperator& op, IramFactor& fac, std::span<const double> restart_from, int64_t k,
                       Which which, double tol, double* ritz_norm) {
  return iram_cycle(op, fac.span(), fac, restart_from, k, which, tol, ritz_norm);
}

EigenResult iram_cycle(const LinearOperator& op, const ArnoldiSpan& s, IramState& st,
                       std::span<const double> restart_from, int64_t k, Which which, double tol, double* ritz_norm) {
  const int64_t n = op.n, m = s.m;
  int64_t mm = m;
  check_sizes(op, k, mm, "iram_cycle");
  if (s.n != n || mm != m)
    throw KernelError("iram_cycle: the factorisation is for n = " + std::to_string(s.n) + ", subspace " +
                      std::to_string(m) + "; the operator has n = " + std::to_string(n));
  check_implicit(n, k, m, "iram_cycle");
  if (!restart_from.empty() && static_cast<int64_t>(restart_from.size()) != n)
    throw KernelError("iram_cycle: restart vector has " + std::to_string(restart_from.size()) +
                      " values, expected n = " + std::to_string(n));
  int64_t matvecs = 0;
  if (!restart_from.empty()) {
    iram_start(s, st, restart_from);
    extend_factor(op, s, st, 0, matvecs);
  } else if (!st.started) {
    iram_start(s, st, start_vector(n, {}, st.seed++));
    extend_factor(op, s, st, 0, matvecs);
  } else if (m < n) {
    const int64_t kk = iram_contract(s, st, k, which, tol);
    extend_factor(op, s, st, kk, matvecs);
  }
  EigenResult res = iram_ritz(s, st.beta, k, which, tol, ritz_norm);
  res.matvecs = matvecs;
  return res;
}

void iram_start(const ArnoldiSpan& s, IramState& st, std::span<const double> v) {
  const int64_t n = s.n;
  std::fill(s.H, s.H + (s.m + 1) * s.m, 0.0);
  double nr = v.empty() ? 0.0 : nrm2(n, v.data());
  if (nr == 0 || !std::isfinite(nr)) {
    const std::vector<double> r = random_vector(n, st.seed++);
    std::copy(r.begin(), r.end(), s.V);
    nr = nrm2(n, s.V);
  } else {
    std::copy(v.begin(), v.end(), s.V);
  }
  cblas_dscal(bi(n), 1.0 / nr, s.V, 1);
  st.beta = 0;
  std::fill(s.f, s.f + n, 0.0);
  st.started = true;
}

int64_t iram_contract(const ArnoldiSpan& s, IramState& st, int64_t k, Which which, double tol) {
  EigenResult res;
  double anorm = 0;
  ritz_pairs(s, st.beta, k, which, res, &anorm, false);
  const int64_t nconv = count_converged(res, k, anorm, tol);
  const AllRitz all = all_ritz(s, st.beta, which);
  const int64_t kk = kept_size(all, k, s.m, nconv);
  iram_truncate(s, st, all, kk);
  return kk;
}

EigenResult iram_ritz(const ArnoldiSpan& s, double beta, int64_t k, Which which, double tol, double* ritz_norm) {
  EigenResult res;
  double anorm = 0;
  ritz_pairs(s, beta, k, which, res, &anorm, true);
  res.converged = count_converged(res, k, anorm, tol) == k;
  if (ritz_norm) *ritz_norm = anorm;
  return res;
}

EigenResult arnoldi(const LinearOperator& op, const ArnoldiOptions& opt) {
  const int64_t n = op.n, k = opt.k;
  int64_t m = opt.subspace;
  check_sizes(op, k, m, "arnoldi");
  if (opt.which != Which::largest_magnitude && opt.which != Which::largest_real)
    throw KernelError("arnoldi: which must be largest_magnitude or largest_real");
  if (opt.restart == Restart::implicit) return iram(op, opt, m);
  ArnoldiBasis w(n, m);
  std::vector<double> v = start_vector(n, opt.start, opt.seed);
  EigenResult res;
  int64_t matvecs = 0, restarts = 0, checked = 0;
  while (true) {
    const double h = arnoldi_factor(op, w, v, opt.seed + static_cast<std::uint64_t>(restarts), matvecs);
    double anorm = 0;
    ritz_pairs(w, h, k, opt.which, res, &anorm);
    const int64_t nconv = count_converged(res, k, anorm, opt.tol);
    res.converged = nconv == k;
    res.matvecs = matvecs;
    res.check_matvecs = checked;
    res.restarts = restarts;
    // a corrected set restarts with every pair at full weight (the converged ones too)
    const bool swapped = res.converged && opt.stop_when_converged && opt.verify && m < n &&
                         verify_or_swap(op, opt, res, matvecs, checked);
    if ((res.converged && opt.stop_when_converged) || restarts >= opt.max_restarts || m == n) return res;
    v = ritz_restart_vector(res, n, opt.weight_by_residual && !swapped);
    ++restarts;
    if (opt.on_restart) {
      RestartState st{restarts, matvecs, res.values_re, res.values_im, res.residuals, res.vectors_re, res.vectors_im,
                      v, false, m};
      opt.on_restart(st);
      if (st.stop) {
        res.restarts = restarts;
        return res;
      }
      if (static_cast<int64_t>(v.size()) != n)
        throw KernelError("arnoldi: the restart callback left a vector of " + std::to_string(v.size()) +
                          " values, expected n = " + std::to_string(n));
    }
  }
}

// ---------------------------------------------------------------- power iteration

EigenResult power_iteration(const LinearOperator& op, const PowerOptions& opt) {
  const int64_t n = op.n;
  if (n < 1 || !op.apply) throw KernelError("power: empty operator");
  if (opt.max_iter < 1) throw KernelError("power: max_iter must be >= 1");
  std::vector<double> v = start_vector(n, {}, opt.seed), w(sz(n));
  EigenResult res;
  double lam = 0, resid = 0;
  for (int64_t it = 0; it < opt.max_iter; ++it) {
    op.apply(v.data(), w.data());
    ++res.matvecs;
    lam = cblas_ddot(bi(n), v.data(), 1, w.data(), 1);
    const double wn = nrm2(n, w.data());
    // ||w - lam v||^2 = ||w||^2 - lam^2 for unit v; computed directly to avoid cancellation.
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double d = w[sz(i)] - lam * v[sz(i)];
      s += d * d;
    }
    resid = std::sqrt(s);
    if (resid <= opt.tol * std::abs(lam) || wn == 0) {
      res.converged = true;
      break;
    }
    for (int64_t i = 0; i < n; ++i) v[sz(i)] = w[sz(i)] / wn;
  }
  res.values_re = {lam};
  res.values_im = {0.0};
  res.residuals = {resid};
  res.vectors_re = std::move(v);
  return res;
}

}  // namespace ymlopt::eigen
