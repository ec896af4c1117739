// Shared fixtures of the prune-family tests: a registry with the prune.* and
// distill.* components, correlated calibration activations, and naive
// long-double references (layer output error, Gram matrices).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "../components/test_context.hpp"
#include "prune/prune.hpp"

namespace ymlopt::test {

/// A TestRegistry holding the components this family defines (not prune.magnitude/nm).
inline const TestRegistry& prune_registry() {
  static const TestRegistry reg = [] {
    TestRegistry r;
    register_prune_obs(r);
    register_prune_lowrank(r);
    register_prune_structured(r);
    register_distill(r);
    return r;
  }();
  return reg;
}

/// Normal(0, 1) entries.
template <class T> Mat<T> normal(std::int64_t rows, std::int64_t cols, std::uint32_t seed, std::int64_t pad = 0) {
  Mat<T> a(rows, cols, pad);
  std::mt19937 gen(seed);
  std::normal_distribution<double> d(0, 1);
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) a(r, c) = static_cast<T>(d(gen));
  return a;
}

/// Correlated activations X = Z L (Z [m,k] normal, L [k,k] a random mixing with
/// a decaying spectrum: row p of L scaled by 1/(1 + p/2), so that a few latent
/// directions dominate and the features are strongly correlated), in long double.
/// (With an unscaled Gaussian L the 64 features are nearly uncorrelated and OBS
/// gains little over magnitude pruning: ratio 0.94-0.99 at 50%.)
template <class T> Mat<T> correlated(std::int64_t m, std::int64_t k, std::uint32_t seed) {
  const Mat<double> z = normal<double>(m, k, seed), l = normal<double>(k, k, seed + 1);
  Mat<T> x(m, k);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < k; ++j) {
      long double s = 0;
      for (std::int64_t p = 0; p < k; ++p) s += static_cast<long double>(z(i, p)) * l(p, j) / (1.0L + p / 2.0L);
      x(i, j) = static_cast<T>(s);
    }
  return x;
}

/// ||X Aᵀ - X Bᵀ||_F in long double, X [m,k], A and B [n,k].
template <class T, class U>
double output_error(const Mat<T>& x, const Mat<U>& a, const Mat<U>& b) {
  long double s = 0;
  for (std::int64_t i = 0; i < x.rows; ++i)
    for (std::int64_t r = 0; r < a.rows; ++r) {
      long double d = 0;
      for (std::int64_t c = 0; c < x.cols; ++c)
        d += static_cast<long double>(x(i, c)) * (static_cast<long double>(a(r, c)) - static_cast<long double>(b(r, c)));
      s += d * d;
    }
  return static_cast<double>(std::sqrt(s));
}

/// ||Y - X Wᵀ||_F in long double, Y [m,n], X [m,k], W [n,k].
template <class T, class U>
double residual(const Mat<T>& x, const Mat<T>& y, const Mat<U>& w) {
  long double s = 0;
  for (std::int64_t i = 0; i < x.rows; ++i)
    for (std::int64_t r = 0; r < w.rows; ++r) {
      long double d = static_cast<long double>(y(i, r));
      for (std::int64_t c = 0; c < x.cols; ++c) d -= static_cast<long double>(x(i, c)) * static_cast<long double>(w(r, c));
      s += d * d;
    }
  return static_cast<double>(std::sqrt(s));
}

/// Y = X Wᵀ in long double, rounded to T.
template <class T> Mat<T> layer_output(const Mat<T>& x, const Mat<T>& w) {
  Mat<T> y(x.rows, w.rows);
  for (std::int64_t i = 0; i < x.rows; ++i)
    for (std::int64_t r = 0; r < w.rows; ++r) {
      long double s = 0;
      for (std::int64_t c = 0; c < x.cols; ++c) s += static_cast<long double>(x(i, c)) * w(r, c);
      y(i, r) = static_cast<T>(s);
    }
  return y;
}

/// Per-row magnitude pruning: the `zeros` smallest |w| of each row set to 0.
template <class T> Mat<T> magnitude_prune_rows(const Mat<T>& w, std::int64_t zeros) {
  Mat<T> out = w;
  for (std::int64_t r = 0; r < w.rows; ++r) {
    std::vector<std::int64_t> idx(static_cast<std::size_t>(w.cols));
    for (std::int64_t c = 0; c < w.cols; ++c) idx[static_cast<std::size_t>(c)] = c;
    std::stable_sort(idx.begin(), idx.end(), [&](std::int64_t a, std::int64_t b) { return std::abs(w(r, a)) < std::abs(w(r, b)); });
    for (std::int64_t i = 0; i < zeros; ++i) out(r, idx[static_cast<std::size_t>(i)]) = T(0);
  }
  return out;
}

/// Copy of a Mat with another padding (to test strided views).
template <class T> Mat<T> with_pad(const Mat<T>& a, std::int64_t pad) {
  Mat<T> out(a.rows, a.cols, pad);
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t c = 0; c < a.cols; ++c) out(r, c) = a(r, c);
  return out;
}

/// Transposed copy.
template <class T> Mat<T> transposed(const Mat<T>& a) {
  Mat<T> out(a.cols, a.rows);
  for (std::int64_t r = 0; r < a.rows; ++r)
    for (std::int64_t c = 0; c < a.cols; ++c) out(c, r) = a(r, c);
  return out;
}

}  // namespace ymlopt::test
