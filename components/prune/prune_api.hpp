// C++ API of the prune family, for the optimizer (and the tests): the same
// algorithms as the prune.* / distill.* components, on plain row-major arrays.
//
//   // OBS (SparseGPT) pruning of W [n,k] with H = 2/m XᵀX:
//   std::vector<double> h = ymlopt::prune::hessian(x.data(), m, k, k);
//   std::vector<double> wp = ymlopt::prune::obs_prune(w.data(), n, k, k, h.data(), {.sparsity = 0.5});
//   // Energy-based rank for a low-rank factorization:
//   std::int64_t r = ymlopt::prune::rank_for_energy(w.data(), n, k, k, 0.99);
//   // Physically drop FFN neurons:
//   auto small = ymlopt::prune::shrink_ffn<float>({w1, ff, d, d}, b1, {w2, d, ff, ff}, keep);
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace ymlopt::prune {

// ---------------------------------------------------------------- OBS (obs.cpp)

/// H = scale · XᵀX of X [m, k] (row-major, leading dimension ldx), as a dense
/// k x k double matrix. scale defaults to 2/m (the layer-wise OBS Hessian).
///
///   auto h = hessian(x, m, k, k);            // 2/m XᵀX
///   auto h2 = hessian(x, m, k, k, 1.0);      // XᵀX
std::vector<double> hessian(const float* x, std::int64_t m, std::int64_t k, std::int64_t ldx, double scale = -1);
std::vector<double> hessian(const double* x, std::int64_t m, std::int64_t k, std::int64_t ldx, double scale = -1);

/// Options of obs_prune. prune_n/prune_m > 0 select an N:M pattern (prune_n
/// zeros out of every prune_m consecutive weights of a row, e.g. 2:4) and
/// ignore `sparsity`; otherwise `sparsity` (fraction of zeros per row) applies.
struct ObsOptions {
  double sparsity = 0.5;
  std::int64_t prune_n = 0;
  std::int64_t prune_m = 0;
  std::int64_t block = 128;  // column block size (lazy batch updates)
  double damp = 0.01;        // fraction of mean(diag H) added to the diagonal
};

/// Result of obs_prune besides the weights: the OBS loss estimate
/// sum (w - q)^2 / [H^-1]_jj / 2 and the number of dead columns (H_jj == 0).
struct ObsStats {
  double loss = 0;
  std::int64_t dead_columns = 0;
};

/// SparseGPT-style OBS pruning (Frantar & Alistarh 2023) of W [n, k] (row-major,
/// rows = output features) given the layer Hessian H [k, k] (row-major, dense).
/// Returns the pruned n x k matrix; each row has exactly round(sparsity·k)
/// zeros (unstructured, more if dead columns), or N zeros in each group of M.
///
///   ObsOptions o; o.prune_n = 2; o.prune_m = 4;   // 2:4
///   auto wp = obs_prune(w, n, k, k, h.data(), o);
std::vector<double> obs_prune(const double* w, std::int64_t n, std::int64_t k, std::int64_t ldw, const double* h,
                              const ObsOptions& opt, ObsStats* stats = nullptr);

// ------------------------------------------------------------ low rank (lowrank.cpp)

/// Singular values (descending) of W [n, k] (row-major, leading dimension ld), via LAPACK dgesdd.
///
///   std::vector<double> s = singular_values(w, n, k, k);
std::vector<double> singular_values(const float* w, std::int64_t n, std::int64_t k, std::int64_t ld);
std::vector<double> singular_values(const double* w, std::int64_t n, std::int64_t k, std::int64_t ld);

/// Smallest r such that sum_{i<r} s_i^2 >= energy · sum s_i^2 (energy in [0, 1]);
/// 0 for a zero matrix or energy 0.
///
///   std::int64_t r = rank_for_energy(w, n, k, k, 0.95);
std::int64_t rank_for_energy(std::span<const double> sigma, double energy);
std::int64_t rank_for_energy(const float* w, std::int64_t n, std::int64_t k, std::int64_t ld, double energy);
std::int64_t rank_for_energy(const double* w, std::int64_t n, std::int64_t k, std::int64_t ld, double energy);

/// A factor pair W ≈ A B with A [n, r] and B [r, k] (row-major), and the singular values of W.
struct LowRank {
  std::int64_t n = 0, k = 0, r = 0;
  std::vector<double> a, b, sigma;
};

/// Truncated SVD of W [n, k] to rank r (1 <= r <= min(n, k)). balanced = false:
/// A = U_r Σ_r, B = V_rᵀ; balanced = true: A = U_r Σ_r^½, B = Σ_r^½ V_rᵀ.
///
///   LowRank f = truncated_svd(w, n, k, k, 64, true);   // f.a: n x 64, f.b: 64 x k
LowRank truncated_svd(const double* w, std::int64_t n, std::int64_t k, std::int64_t ld, std::int64_t r,
                      bool balanced);

// ---------------------------------------------------------- structured (structured.cpp)

/// A read-only row-major strided matrix.
template <class T> struct MatRef {
  const T* data = nullptr;
  std::int64_t rows = 0, cols = 0, ld = 0;
  const T& operator()(std::int64_t r, std::int64_t c) const { return data[r * ld + c]; }
};

/// An owning dense row-major matrix (ld == cols); a vector is 1 x n.
template <class T> struct Matrix {
  std::int64_t rows = 0, cols = 0;
  std::vector<T> data;
  T& operator()(std::int64_t r, std::int64_t c) { return data[static_cast<std::size_t>(r * cols + c)]; }
  const T& operator()(std::int64_t r, std::int64_t c) const { return data[static_cast<std::size_t>(r * cols + c)]; }
  MatRef<T> ref() const { return {data.data(), rows, cols, cols}; }
};

/// Indices of the `count` largest scores, as a 0/1 keep mask (ties: lower index first).
///
///   std::vector<std::int32_t> keep = keep_top({0.1, 3.0, 2.0}, 2);   // {0, 1, 1}
std::vector<std::int32_t> keep_top(std::span<const double> scores, std::int64_t count);

/// Head scores from the output projection W_o [d, heads·dh] (torch layout):
/// magnitude: ||W_o[:, head]||_F^2; with `act` [m, heads·dh] (the heads' context
/// vectors on calibration tokens, may be null): mean_t ||act[t, head]||^2 · ||W_o[:, head]||_F^2
/// (a gradient-free Fisher proxy: the head's expected squared contribution).
///
///   auto s = head_scores<float>({wo, d, h * dh, h * dh}, nullptr, h);
template <class T> std::vector<double> head_scores(MatRef<T> wo, const MatRef<T>* act, std::int64_t heads);

/// Neuron scores of an FFN W1 [ff, d] (+ b1 [ff], may be empty), W2 [d, ff]:
/// magnitude: ||[W1 row j, b1_j]|| · ||W2[:, j]||; with `act` [m, ff] (hidden
/// activations on calibration tokens): mean_t act[t, j]^2 · ||W2[:, j]||^2.
template <class T>
std::vector<double> neuron_scores(MatRef<T> w1, std::span<const T> b1, MatRef<T> w2, const MatRef<T>* act);

/// Rows of `a` in the groups of `unit` consecutive rows whose keep flag is non-zero
/// (keep.size() · unit == a.rows). keep_cols: the same on columns.
///
///   Matrix<float> wq2 = keep_rows<float>({wq, h * dh, d, d}, keep, dh);
template <class T> Matrix<T> keep_rows(MatRef<T> a, std::span<const std::int32_t> keep, std::int64_t unit);
template <class T> Matrix<T> keep_cols(MatRef<T> a, std::span<const std::int32_t> keep, std::int64_t unit);
/// Elements of the vector `v` in kept groups of `unit`.
template <class T> std::vector<T> keep_elems(std::span<const T> v, std::span<const std::int32_t> keep, std::int64_t unit);

/// Attention weights after dropping heads (torch layout): q/k/v [h'·dh, d],
/// biases [h'·dh] (empty when absent), o [d, h'·dh]. With a fused qkv input,
/// `qkv` [3·h'·dh, d] and `qkv_bias` [3·h'·dh] are set instead of q/k/v.
template <class T> struct ShrunkAttention {
  Matrix<T> q, k, v, qkv, o;
  std::vector<T> q_bias, k_bias, v_bias, qkv_bias;
  std::int64_t heads = 0;
};

/// Drops the heads with keep[h] == 0 from separate Wq/Wk/Wv [heads·dh, d]
/// (+ optional biases, empty spans when absent) and Wo [d, heads·dh].
///
///   auto s = shrink_heads<float>(wq, wk, wv, {}, {}, {}, wo, keep, dh);
template <class T>
ShrunkAttention<T> shrink_heads(MatRef<T> wq, MatRef<T> wk, MatRef<T> wv, std::span<const T> bq,
                                std::span<const T> bk, std::span<const T> bv, MatRef<T> wo,
                                std::span<const std::int32_t> keep, std::int64_t dh);

/// The same for a fused Wqkv [3·heads·dh, d] (q rows, then k rows, then v rows)
/// with optional bias [3·heads·dh].
template <class T>
ShrunkAttention<T> shrink_heads_fused(MatRef<T> wqkv, std::span<const T> bqkv, MatRef<T> wo,
                                      std::span<const std::int32_t> keep, std::int64_t dh);

/// An FFN after dropping neurons: w1 [ff', d], b1 [ff'] (empty when absent), w2 [d, ff'].
template <class T> struct ShrunkFfn {
  Matrix<T> w1, w2;
  std::vector<T> b1;
};

/// Drops the neurons with keep[j] == 0: rows of W1/b1, columns of W2.
///
///   auto f = shrink_ffn<float>({w1, ff, d, d}, b1, {w2, d, ff, ff}, keep);
template <class T>
ShrunkFfn<T> shrink_ffn(MatRef<T> w1, std::span<const T> b1, MatRef<T> w2, std::span<const std::int32_t> keep);

// ------------------------------------------------------------ distillation (distill.cpp)

/// Closed-form refit of W [n, k] to targets Y [m, n] on inputs X [m, k]
/// (minimises ||Y - X Wᵀ||_F): mask = true keeps each row's zero pattern (least
/// squares on that row's non-zero columns), false refits densely. The normal
/// equations use XᵀX + ridge·mean(diag XᵀX)·I (Cholesky).
///
///   auto wf = refit(x, m, k, y, n, w, /*mask=*/true, 1e-4);
std::vector<double> refit(const double* x, std::int64_t m, std::int64_t k, const double* y, std::int64_t n,
                          const double* w, bool mask, double ridge);

/// Alternating closed-form refit of a factor pair W ≈ A B (A [n, r], B [r, k],
/// modified in place): `iters` rounds of (B with A fixed, then A with B fixed).
void refit_lowrank(const double* x, std::int64_t m, std::int64_t k, const double* y, std::int64_t n,
                   std::vector<double>& a, std::vector<double>& b, std::int64_t r, std::int64_t iters, double ridge);

}  // namespace ymlopt::prune
