// Spectral analysis: a reusable eigensolver API (namespace ymlopt::eigen) and
// the eigen.* components built on it (register_eigen).
//
// Components (f32 or f64 input; f32 is solved in double and rounded at the end):
//   eigen.lanczos    top-k eigenpairs of a symmetric A [n,n], or of H = XᵀX from X [m,n]
//                    (operator=gram, applied as Xᵀ(X v), H never formed); thick restart
//   eigen.arnoldi    top-k eigenpairs of a non-symmetric A [n,n]; explicitly restarted
//                    Arnoldi (ERAM), or restart=implicit: IRAM; complex pairs reported as re/im
//   eigen.meram      the same as eigen.arnoldi by MERAM: concurrent ERAM co-methods (subspaces
//                    "5,7,10") exchanging Ritz vectors through a UniteBoard (meram.hpp);
//                    restart=implicit: MIRAM (IRAM co-methods)
//   eigen.svd_topk   top-k singular triplets of A [m,n]: randomized subspace iteration
//   eigen.power      the eigenvalue of largest modulus by power iteration
//   eigen.eram_cycle one ERAM restart cycle on inout Ritz vectors/values (a MERAM co-method's
//                    loop body in a workflow); eigen.generate and eigen.matrix_market write
//                    a test matrix, dense or CSR (workflow_components.hpp)
// Every component takes format=csr: A kept sparse on three ports
// (operator_ports.hpp).
// Each reports "matvecs", "restarts" and "residual" (largest wanted residual
// norm ||A x - λ x||, x of unit norm) and raises a KernelError naming the
// residual reached when it does not converge within its budget. The Arnoldi
// solvers accept converged pairs only once check_wanted() (verify.cpp) found
// no evidence of a more wanted eigenvalue outside them ("check_matvecs" counts
// that work):
// a residual under tol alone does not tell the k most wanted eigenvalues from
// a less wanted one of nearly the same modulus.
//
// Solver API, for reuse by other methods (MERAM co-methods, pruning):
//
//   using namespace ymlopt::eigen;
//   LinearOperator op = dense_operator(a.data(), n, n);          // row-major, ld = n
//   ArnoldiOptions o;  o.k = 4;  o.subspace = 20;  o.which = Which::largest_magnitude;
//   o.on_restart = [&](RestartState& s) {                        // once per restart
//     if (better) s.restart_vector = other_method_vector;        // inject a vector
//   };
//   EigenResult r = arnoldi(op, o);  // r.values_re/im, r.vectors_re/im (n x k, vector j at j*n)
//
// Vectors are stored one after the other: vector j is [j*n, (j+1)*n).
#pragma once

#include <ymlopt/sdk.hpp>

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace ymlopt {
/// Registers eigen.lanczos, eigen.arnoldi, eigen.meram, eigen.svd_topk and eigen.power,
/// and the workflow building blocks of register_eigen_workflow (workflow_components.hpp).
void register_eigen(Registry& reg);
}  // namespace ymlopt

namespace ymlopt::eigen {

/// A square linear operator y = A x of dimension n. `apply` must not alias x and y.
/// The built-in operators keep no state between calls and may be applied from
/// several threads at once (co-methods sharing one matrix).
///
///   LinearOperator op{n, [&](const double* x, double* y) { ... }};
struct LinearOperator {
  std::int64_t n = 0;
  std::function<void(const double* x, double* y)> apply;
};

/// y = A x for a row-major dense A [n,n] with leading dimension ld (kept by pointer).
LinearOperator dense_operator(const double* a, std::int64_t n, std::int64_t ld);

/// y = Xᵀ (X x) for a row-major X [m,n] (ld >= n): the Gram matrix H = XᵀX [n,n]
/// applied without forming it (two matrix-vector products, m doubles of scratch).
LinearOperator gram_operator(const double* x, std::int64_t m, std::int64_t n, std::int64_t ld);

/// A compressed-sparse-row matrix (0-based).
///
///   CsrMatrix s = CsrMatrix::from_dense(a.data(), n, n, n);  // drops exact zeros
struct CsrMatrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<std::int64_t> row_ptr;  // rows + 1
  std::vector<std::int64_t> col;
  std::vector<double> val;
  /// Keeps the entries with |a_ij| > drop.
  static CsrMatrix from_dense(const double* a, std::int64_t rows, std::int64_t cols, std::int64_t ld,
                              double drop = 0);
  std::int64_t nnz() const { return static_cast<std::int64_t>(val.size()); }
};

/// y = S x for a square CSR matrix (kept by reference: it must outlive the operator).
LinearOperator csr_operator(const CsrMatrix& s);

/// Which end of the spectrum is wanted.
enum class Which {
  largest_algebraic,  // symmetric: largest λ
  largest_magnitude,  // largest |λ|
  largest_real,       // non-symmetric: largest Re λ
};

/// What a solver returns. Vectors are n x k, vector j at [j*n, (j+1)*n); for a
/// complex eigenvalue the vector is vectors_re + i vectors_im (unit norm).
/// residuals[j] = ||A x_j - λ_j x_j|| (the Ritz estimate) for unit x_j.
struct EigenResult {
  std::vector<double> values_re, values_im;
  std::vector<double> vectors_re, vectors_im;  // vectors_im empty for symmetric solvers
  std::vector<double> residuals;
  std::int64_t matvecs = 0;
  std::int64_t check_matvecs = 0;  // of matvecs, those of check_wanted() (arnoldi(), meram())
  std::int64_t restarts = 0;
  bool converged = false;
  double max_residual() const;
};

/// Passed to the per-restart callback after the Ritz pairs of a cycle are
/// known and before the next cycle starts. The callback may replace
/// `restart_vector` (Arnoldi: the next start vector, length n) or set `stop`.
struct RestartState {
  std::int64_t restart = 0;   // cycles done so far (1 after the first)
  std::int64_t matvecs = 0;
  std::span<const double> values_re, values_im, residuals;  // the k wanted Ritz values
  std::span<const double> vectors_re, vectors_im;            // their Ritz vectors (n x k)
  std::vector<double>& restart_vector;                       // Arnoldi only; empty for Lanczos
  bool stop = false;
  /// Matvecs the next cycle takes if the callback leaves restart_vector as it
  /// is: m for an explicit restart, p = m - k' for an implicit one (Arnoldi only).
  std::int64_t next_cost = 0;
};
using RestartCallback = std::function<void(RestartState&)>;

/// Options of lanczos(): thick-restarted Lanczos for a symmetric operator.
struct LanczosOptions {
  std::int64_t k = 6;
  std::int64_t subspace = 0;  // max basis size; 0: min(n, max(2k + 1, k + 20))
  double tol = 1e-10;         // converged when residual <= tol * max(|λ|, ...)
  std::int64_t max_restarts = 300;
  Which which = Which::largest_algebraic;  // or largest_magnitude
  bool full_reorth = true;  // false: three-term recurrence only (plus the restart arrow)
  std::uint64_t seed = 1;
  std::vector<double> start;  // optional start vectors (n x p); their sum starts the basis
  RestartCallback on_restart;
};

/// Top-k eigenpairs of a symmetric operator, thick restart (Wu-Simon) keeping
/// the wanted Ritz vectors. Values in wanted order (descending λ or |λ|).
///
///   LanczosOptions o; o.k = 10;  EigenResult r = lanczos(dense_operator(a, n, n), o);
EigenResult lanczos(const LinearOperator& op, const LanczosOptions& opt);

/// How arnoldi() restarts.
///   explicit_: ERAM, a new m-step factorisation from a combination of the wanted
///              Ritz vectors (m matvecs per restart);
///   implicit:  IRAM (Sorensen; Lehoucq & Sorensen 1996): the p = m - k' unwanted
///              Ritz values are applied as exact shifts by implicit shifted QR on
///              H_m in real arithmetic (a conjugate pair as one Francis double-shift
///              step), the factorisation is truncated to k' and extended back to m
///              (p matvecs per restart). k' = k, plus min(converged, p/2) as ARPACK
///              does against stagnation, plus one when k' would split a conjugate pair.
enum class Restart { explicit_, implicit };

/// Parses "explicit" / "implicit" (throws KernelError naming the bad value).
Restart parse_restart(const std::string& text);

/// Options of arnoldi(): explicitly (ERAM, default) or implicitly (IRAM) restarted Arnoldi.
///
///   ArnoldiOptions o;  o.k = 4;  o.subspace = 12;  o.restart = Restart::implicit;  // IRAM
struct ArnoldiOptions {
  std::int64_t k = 4;
  std::int64_t subspace = 0;  // Arnoldi factorisation size m; 0: min(n, max(2k + 1, k + 20))
  double tol = 1e-10;
  std::int64_t max_restarts = 1000;
  Which which = Which::largest_magnitude;  // or largest_real
  std::uint64_t seed = 1;
  std::vector<double> start;  // optional start vectors (n x p), combined into the first start vector
  /// Restart vector weights: true: sqrt(residual / largest residual), floored
  /// at 1e-3 (unconverged vectors dominate); false: all 1.
  bool weight_by_residual = true;
  /// explicit_ (ERAM) or implicit (IRAM; needs k < subspace - 1 unless subspace >= n).
  /// With implicit, RestartState::restart_vector is passed EMPTY: a callback that
  /// fills it (n values) makes that restart explicit from the vector (a new m-step
  /// factorisation, m matvecs; MIRAM's adoption of a gathered set), otherwise the
  /// restart is implicit.
  Restart restart = Restart::explicit_;
  /// false: keep restarting when the k pairs converged (until max_restarts or a
  /// callback's stop; a co-method whose callback decides). tol still drives IRAM's
  /// k' adjustment and EigenResult::converged.
  bool stop_when_converged = true;
  /// true: converged pairs are accepted only once check_wanted() finds no
  /// evidence of a more wanted eigenvalue outside them; one it finds replaces the
  /// least wanted pair and the solver restarts from the set (explicitly under IRAM).
  bool verify = true;
  RestartCallback on_restart;
};

/// Top-k eigenpairs of a general operator. Restart::implicit: IRAM (see Restart);
/// the convergence test and the returned pairs are as below. Restart::explicit_: each cycle builds an m-step Arnoldi
/// factorisation (modified Gram-Schmidt plus one reorthogonalisation pass),
/// takes the Ritz pairs of the Hessenberg matrix (LAPACK dgeev) and restarts
/// from a weighted sum of the wanted Ritz vectors (real and imaginary parts of a
/// complex pair). Like every explicit restart it can converge to eigenvalues
/// that are not the wanted ones on highly non-normal operators (check the
/// values, not only the residuals). A conjugate pair is ordered +im first; if the k-th wanted
/// value is the first of a pair, only it is returned.
EigenResult arnoldi(const LinearOperator& op, const ArnoldiOptions& opt);

/// What check_wanted() concluded about a converged set.
struct WantedCheck {
  enum class Verdict {
    settled,       // the most wanted value outside the set is less wanted than all of the set's
    missed,        // a value outside the set is more wanted than the set's least wanted one
    inconclusive,  // the check's budget ran out between the two (no evidence either way)
  };
  Verdict verdict = Verdict::settled;
  double re = 0, im = 0, residual = 0;  // the most wanted Ritz value outside the set, its residual
  std::vector<double> x_re, x_im;       // missed: its unit vector (re + i im), orthogonal to the set
  std::int64_t matvecs = 0;
};

/// Whether a converged set of k Ritz pairs (vectors n x k, as EigenResult) holds
/// the k most wanted eigenvalues: a short IRAM on the operator deflated by the
/// set (P A P, P the projector onto the complement of the set's real and
/// imaginary vector parts) from a random start, compared with the set's least
/// wanted value L. A deflated Ritz value θ with residual r decides it once
/// key(θ) - 10 r > L (missed) or, θ converged to 1e-6, key(θ) + 10 r < L
/// (settled; a θ at least 2% less wanted than that, converged to 1e-3, settles
/// too); otherwise it restarts, at most 15 times (inconclusive: no evidence
/// either way). A θ within 2% of L is looked for again by a second run from
/// another start with a larger subspace (a deflated IRAM can itself converge to
/// a less wanted value and miss the one it checks for): missed if either finds
/// a more wanted value. Explicit restarts can converge to a less wanted
/// eigenvalue with a small residual (a sign competitor of nearly the same
/// modulus); this is the test that catches it. `abandon`, polled at each
/// restart, ends the check early (inconclusive).
///
///   WantedCheck c = check_wanted(op, r, Which::largest_magnitude, 7);
///   if (c.verdict == WantedCheck::Verdict::missed) r = with_missed(op, r, c, Which::largest_magnitude);
WantedCheck check_wanted(const LinearOperator& op, const EigenResult& set, Which which, std::uint64_t seed,
                         const std::function<bool()>& abandon = {});

/// The seed of check_wanted()'s start vector for a solver seeded `seed` (every
/// solver and cycle component uses it, so a cycle loop repeats arnoldi()).
inline std::uint64_t check_seed(std::uint64_t seed) { return seed * 7919u + 17u; }

/// `set` with its least wanted pair replaced by the missed one check_wanted()
/// found (residual measured against op: 1 or 2 matvecs), in wanted order,
/// converged = false: the set to restart from.
EigenResult with_missed(const LinearOperator& op, const EigenResult& set, const WantedCheck& c, Which which);

/// One Arnoldi cycle from a start vector: the Ritz pairs of its factorisation
/// (the building block of arnoldi(), usable by co-methods that drive restarts
/// themselves). `start` need not be normalised (all zero or non-finite: a
/// random vector from `seed`). matvecs counts m. `ritz_norm`, when given,
/// receives the largest |θ| over all m Ritz values (the ||A|| estimate of
/// ARPACK's convergence floor, as arnoldi() uses it).
///
///   double anorm = 0;
///   EigenResult c = arnoldi_cycle(op, v, 4, 10, Which::largest_magnitude, 1, &anorm);
///   double worst = 0;  // arnoldi() converges when worst <= tol
///   for (std::size_t j = 0; j < 4; ++j)
///     worst = std::max(worst, relative_residual(c.residuals[j], std::hypot(c.values_re[j], c.values_im[j]), anorm));
///   v = ritz_restart_vector(c, op.n, true);  // the next cycle's start, as arnoldi() restarts
EigenResult arnoldi_cycle(const LinearOperator& op, std::span<const double> start, std::int64_t k,
                          std::int64_t m, Which which, std::uint64_t seed = 1, double* ritz_norm = nullptr);

/// An Arnoldi factorisation A V_m = V_m H_m + f e_mᵀ: V n x (m+1) (column m
/// spare), H (m+1) x m, both column-major.
struct ArnoldiBasis {
  std::int64_t n, m;
  std::vector<double> V, H;
  ArnoldiBasis(std::int64_t n_, std::int64_t m_)
      : n(n_), m(m_), V(static_cast<std::size_t>(n_ * (m_ + 1))), H(static_cast<std::size_t>((m_ + 1) * m_)) {}
};

/// An Arnoldi factorisation in caller memory: V n x (m+1) column-major (a
/// vector per column, ld n), f the residual vector (n), H (m+1) x m column-major.
struct ArnoldiSpan {
  std::int64_t n, m;
  double* V;
  double* f;
  double* H;
};

/// What an implicitly restarted factorisation keeps besides its vectors.
struct IramState {
  double beta = 0;         // ||f||, 0 on an invariant subspace
  double anorm_est = 0;    // largest ||A v|| seen: the scale of the invariant-subspace test
  std::uint64_t seed = 1;  // of the next random vector
  bool started = false;    // false: the next cycle factorises from scratch
};

/// An implicitly restarted Arnoldi factorisation in its own memory, kept by
/// the caller between cycles.
struct IramFactor : IramState {
  ArnoldiBasis basis;
  std::vector<double> f;  // the residual vector (n)
  IramFactor(std::int64_t n, std::int64_t m, std::uint64_t seed = 1);
  ArnoldiSpan span() { return {basis.n, basis.m, basis.V.data(), f.data(), basis.H.data()}; }
};

/// One IRAM cycle on a kept factorisation, then its k wanted Ritz pairs (with
/// vectors). The first cycle (or one given `restart_from`, length n: an explicit
/// restart, as MIRAM restarts from an adopted set) factorises from scratch (m
/// matvecs; first cycle: a random start from fac.seed); later ones restart
/// implicitly with arnoldi()'s exact shifts and k' (p = m - k' matvecs; `tol`
/// sets k' through the converged count). A loop of these from IramFactor(n, m,
/// s) takes the steps arnoldi(Restart::implicit, seed s) takes.
///
///   IramFactor fac(op.n, 12);
///   EigenResult c = iram_cycle(op, fac, {}, 4, Which::largest_magnitude, 1e-8);  // factorise
///   while (!c.converged) c = iram_cycle(op, fac, {}, 4, Which::largest_magnitude, 1e-8);
EigenResult iram_cycle(const LinearOperator& op, IramFactor& fac, std::span<const double> restart_from, std::int64_t k,
                       Which which, double tol, double* ritz_norm = nullptr);
/// The same on a factorisation in caller memory (eigen.iram_cycle's ports).
EigenResult iram_cycle(const LinearOperator& op, const ArnoldiSpan& s, IramState& st,
                       std::span<const double> restart_from, std::int64_t k, Which which, double tol,
                       double* ritz_norm = nullptr);

/// The pieces of iram_cycle() for a factorisation whose matvecs run elsewhere
/// (eigen.iram_begin, eigen.arnoldi_step and eigen.iram_end, where the products
/// are tasks over the row blocks of a tiled operator). A cycle is
///
///   iram_start(s, st, v)  or  j0 = iram_contract(s, st, k, which, tol);   // no matvec
///   for (j = j0; j < m; ++j) {
///     if (j > 0) arnoldi_next(s, j, st.beta, st.seed);                   // column j from f
///     op.apply(s.V + j n, s.f);  st.beta = arnoldi_absorb(s, j, st.anorm_est);
///   }
///   EigenResult c = iram_ritz(s, st.beta, k, which, tol);
///
/// which is iram_cycle(), operation for operation (the same numbers).

/// Column j (0 < j < m) of V from f: f / beta and H(j, j-1) = beta, or when
/// beta is 0 (an invariant subspace) a random unit vector orthogonal to
/// columns 0..j-1 (seed, then incremented) and H(j, j-1) = 0.
void arnoldi_next(const ArnoldiSpan& s, std::int64_t j, double beta, std::uint64_t& seed);

/// f holds A v_j: orthogonalises it against columns 0..j into H(0..j, j)
/// (classical Gram-Schmidt; a second pass when the first removed most of it,
/// DGKS as ARPACK), raises anorm_est to ||A v_j|| and returns beta = ||f||
/// (0, with f zeroed, when under 1e-13 anorm_est).
double arnoldi_absorb(const ArnoldiSpan& s, std::int64_t j, double& anorm_est);

/// A new factorisation's first column: v / ||v|| (a random vector from st.seed
/// when v is empty, zero or not finite), H and f zero; the next column to
/// extend is 0.
void iram_start(const ArnoldiSpan& s, IramState& st, std::span<const double> v);

/// The implicit restart of a complete (m-column) factorisation without its
/// matvecs: exact shifts, truncated to k' columns in place. Returns k', the
/// next column to extend.
std::int64_t iram_contract(const ArnoldiSpan& s, IramState& st, std::int64_t k, Which which, double tol);

/// The k wanted Ritz pairs (with vectors) of a complete factorisation whose
/// residual has norm beta; converged when every pair's residual passes tol (matvecs 0).
EigenResult iram_ritz(const ArnoldiSpan& s, double beta, std::int64_t k, Which which, double tol,
                      double* ritz_norm = nullptr);

/// arnoldi()'s restart vector from a cycle's k Ritz pairs: the sum of the real
/// parts, plus the imaginary part of each +im entry, each weighted (when
/// `weighted`) by sqrt(residual / largest residual), floored at 1e-3.
/// `r` needs values_re/im, residuals (k) and vectors_re/im (n x k).
std::vector<double> ritz_restart_vector(const EigenResult& r, std::int64_t n, bool weighted);

/// A Ritz pair's residual relative to its value with ARPACK's floor:
/// residual / max(|θ|, eps^(2/3) * ritz_norm). arnoldi() has converged when
/// this is <= tol for every wanted pair.
double relative_residual(double residual, double value_abs, double ritz_norm);

/// Top-k singular triplets of a matrix: A ≈ U diag(s) Vt.
struct SvdResult {
  std::vector<double> s;   // k, descending
  std::vector<double> u;   // m x k row-major
  std::vector<double> vt;  // k x n row-major
  std::int64_t matvecs = 0;  // products with A or Aᵀ, counted per column of the block
};

/// Options of svd_topk().
struct SvdOptions {
  std::int64_t k = 6;
  std::int64_t oversample = 10;
  std::int64_t power_iters = 2;
  std::uint64_t seed = 1;
};

/// A matrix A [rows, cols] (any shape) applied to blocks of l vectors, row-major:
/// times(x [cols, l], l, y [rows, l]) sets y = A x; times_t(y [rows, l], l, z [cols, l]) sets z = Aᵀ y.
struct BlockOperator {
  std::int64_t rows = 0, cols = 0;
  std::function<void(const double* x, std::int64_t l, double* y)> times;
  std::function<void(const double* y, std::int64_t l, double* z)> times_t;
};

/// A dense row-major A [m,n] with leading dimension ld (kept by pointer): dgemm.
BlockOperator dense_block_operator(const double* a, std::int64_t m, std::int64_t n, std::int64_t ld);

/// Randomized subspace iteration (Halko-Martinsson-Tropp): Y = A Ω, q rounds of
/// Y = A (Aᵀ Q) with a QR (dgeqrf/dorgqr) after every product, then the SVD
/// (dgesdd) of the small B = Qᵀ A = (Aᵀ Q)ᵀ. A is row-major [m,n] with leading
/// dimension ld, or any BlockOperator (a CSR matrix: operator_ports.hpp).
///
///   SvdResult r = svd_topk(a.data(), m, n, n, {.k = 8});
SvdResult svd_topk(const BlockOperator& a, const SvdOptions& opt);
SvdResult svd_topk(const double* a, std::int64_t m, std::int64_t n, std::int64_t ld, const SvdOptions& opt);

/// Options of power_iteration().
struct PowerOptions {
  double tol = 1e-8;  // ||A v - λ v|| <= tol * |λ|
  std::int64_t max_iter = 1000;
  std::uint64_t seed = 1;
};

/// The eigenvalue of largest modulus (Rayleigh quotient) and its vector.
/// matvecs = iterations; restarts = 0; converged false when max_iter is reached.
EigenResult power_iteration(const LinearOperator& op, const PowerOptions& opt);

/// n Gaussian numbers from a seed (the solvers' start vectors).
std::vector<double> random_vector(std::int64_t n, std::uint64_t seed);

}  // namespace ymlopt::eigen
