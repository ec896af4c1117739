// Test matrix generators (see generators.hpp).
#include "eigen/generators.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <numbers>
#include <numeric>
#include <random>
#include <string>

namespace ymlopt::eigen {
namespace {

using std::int64_t;
using std::size_t;

size_t sz(int64_t v) { return static_cast<size_t>(v); }

/// CSR from per-row (col, value) lists; columns sorted, exact zeros dropped.
CsrMatrix from_rows(int64_t rows, int64_t cols, std::vector<std::vector<std::pair<int64_t, double>>>& r) {
  CsrMatrix s;
  s.rows = rows;
  s.cols = cols;
  s.row_ptr.assign(sz(rows + 1), 0);
  for (int64_t i = 0; i < rows; ++i) {
    auto& row = r[sz(i)];
    std::sort(row.begin(), row.end());
    for (size_t p = 0; p < row.size(); ++p) {
      if (p + 1 < row.size() && row[p].first == row[p + 1].first) {
        row[p + 1].second += row[p].second;
        continue;
      }
      if (row[p].second == 0) continue;
      s.col.push_back(row[p].first);
      s.val.push_back(row[p].second);
    }
    s.row_ptr[sz(i + 1)] = s.nnz();
  }
  return s;
}

}  // namespace

int64_t spectrum_dims(const std::vector<std::complex<double>>& eigs) {
  int64_t n = 0;
  for (const auto& e : eigs) n += e.imag() != 0 ? 2 : 1;
  return n;
}

CsrMatrix matrix_with_spectrum(const std::vector<std::complex<double>>& eigs, const SpectrumMatrixOptions& opt) {
  for (size_t i = 0; i < eigs.size(); ++i)
    if (eigs[i].imag() < 0 || !std::isfinite(eigs[i].real()) || !std::isfinite(eigs[i].imag()))
      throw KernelError("matrix_with_spectrum: eigenvalue " + std::to_string(i) + " = " +
                        std::to_string(eigs[i].real()) + (eigs[i].imag() < 0 ? " - " : " + ") +
                        std::to_string(std::abs(eigs[i].imag())) +
                        "i: give each conjugate pair once, with a positive imaginary part (and finite values)");
  if (opt.upper_per_row < 0) throw KernelError("matrix_with_spectrum: upper_per_row must be >= 0");
  const int64_t n = spectrum_dims(eigs);
  if (n < 1) throw KernelError("matrix_with_spectrum: empty spectrum");
  std::mt19937_64 g(opt.seed);
  // T: the blocks, then the couplings right of each row's block.
  std::vector<std::vector<std::pair<int64_t, double>>> t(sz(n));
  int64_t p = 0;
  for (const auto& e : eigs) {
    if (e.imag() != 0) {
      t[sz(p)] = {{p, e.real()}, {p + 1, e.imag()}};
      t[sz(p + 1)] = {{p, -e.imag()}, {p + 1, e.real()}};
      p += 2;
    } else {
      t[sz(p)] = {{p, e.real()}};
      p += 1;
    }
  }
  // Two levels: the rows of the first half of the blocks couple to columns of
  // the second half only, so the coupling C is nilpotent of index 2 and
  // (T - z)⁻¹ stays linear in C (no exponential growth of eigenvalue condition).
  int64_t split = 0;
  for (size_t b = 0; b < (eigs.size() + 1) / 2; ++b) split += eigs[b].imag() != 0 ? 2 : 1;
  const double scale = opt.upper_per_row > 0 ? opt.upper_scale / std::sqrt(double(opt.upper_per_row)) : 0;
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  if (split < n)
    for (int64_t i = 0; i < split; ++i) {
      std::uniform_int_distribution<int64_t> pick(split, n - 1);
      for (int64_t c = 0; c < opt.upper_per_row; ++c) t[sz(i)].emplace_back(pick(g), scale * u(g));
    }
  // A = P D T D⁻¹ Pᵀ: a(perm[i], perm[j]) = d_i t_ij / d_j.
  std::vector<int64_t> perm(sz(n));
  std::iota(perm.begin(), perm.end(), 0);
  if (opt.permute) std::shuffle(perm.begin(), perm.end(), g);
  std::uniform_real_distribution<double> du(1.0, 2.0);
  std::vector<double> d(sz(n));
  for (double& x : d) x = du(g);
  std::vector<std::vector<std::pair<int64_t, double>>> a(sz(n));
  for (int64_t i = 0; i < n; ++i)
    for (const auto& [j, v] : t[sz(i)]) a[sz(perm[sz(i)])].emplace_back(perm[sz(j)], d[sz(i)] * v / d[sz(j)]);
  return from_rows(n, n, a);
}

std::vector<std::complex<double>> random_spectrum(const std::vector<std::complex<double>>& top, int64_t bulk_dims,
                                                  double radius, double complex_fraction, std::uint64_t seed) {
  if (bulk_dims < 0 || !(radius >= 0) || !(complex_fraction >= 0 && complex_fraction <= 1))
    throw KernelError("random_spectrum: need bulk_dims >= 0, radius >= 0 and complex_fraction in [0, 1]");
  std::vector<std::complex<double>> e = top;
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int64_t left = bulk_dims;
  while (left > 0) {
    // Uniform in the disc: r = R sqrt(U), angle uniform.
    const double r = radius * std::sqrt(u(g)), th = 2 * std::numbers::pi * u(g);
    if (left >= 2 && u(g) < complex_fraction) {
      const double im = std::abs(r * std::sin(th)) + 1e-12 * radius;
      if (im > 0) {
        e.emplace_back(r * std::cos(th), im);
      } else {  // radius 0: two real values at the origin, not a pair
        e.emplace_back(0.0, 0.0);
        e.emplace_back(0.0, 0.0);
      }
      left -= 2;
    } else {
      e.emplace_back(r * std::cos(th), 0.0);
      left -= 1;
    }
  }
  return e;
}

std::vector<std::complex<double>> random_spectrum_box(const std::vector<std::complex<double>>& top, int64_t bulk_dims,
                                                      double re_lo, double re_hi, double im_max,
                                                      double complex_fraction, std::uint64_t seed) {
  if (bulk_dims < 0 || !(re_lo <= re_hi) || !(im_max >= 0) || !(complex_fraction >= 0 && complex_fraction <= 1))
    throw KernelError("random_spectrum_box: need bulk_dims >= 0, re_lo <= re_hi, im_max >= 0 and "
                      "complex_fraction in [0, 1]");
  std::vector<std::complex<double>> e = top;
  std::mt19937_64 g(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int64_t left = bulk_dims;
  while (left > 0) {
    const double re = re_lo + (re_hi - re_lo) * u(g);
    if (left >= 2 && im_max > 0 && u(g) < complex_fraction) {
      e.emplace_back(re, im_max * (0.5 * u(g) + 0.5 * u(g)) + 1e-12 * im_max);
      left -= 2;
    } else {
      e.emplace_back(re, 0.0);
      left -= 1;
    }
  }
  return e;
}

CsrMatrix convection_diffusion_2d(int64_t nx, double rho) {
  if (nx < 1) throw KernelError("convection_diffusion_2d: nx must be >= 1");
  const int64_t n = nx * nx;
  const double h = 1.0 / double(nx + 1), h2 = h * h;
  const double dd = 4.0 / h2, dl = -1.0 / h2 - rho / (2 * h), du = -1.0 / h2 + rho / (2 * h), dy = -1.0 / h2;
  std::vector<std::vector<std::pair<int64_t, double>>> r(sz(n));
  for (int64_t j = 0; j < nx; ++j)
    for (int64_t i = 0; i < nx; ++i) {
      const int64_t row = j * nx + i;
      auto& e = r[sz(row)];
      if (j > 0) e.emplace_back(row - nx, dy);
      if (i > 0) e.emplace_back(row - 1, dl);
      e.emplace_back(row, dd);
      if (i + 1 < nx) e.emplace_back(row + 1, du);
      if (j + 1 < nx) e.emplace_back(row + nx, dy);
    }
  return from_rows(n, n, r);
}

std::vector<std::complex<double>> convection_diffusion_2d_eigenvalues(int64_t nx, double rho) {
  const double h = 1.0 / double(nx + 1), h2 = h * h;
  const double prod = 1.0 / (h2 * h2) - rho * rho / (4 * h2);
  const std::complex<double> s = std::sqrt(std::complex<double>(prod, 0.0));
  std::vector<std::complex<double>> e;
  e.reserve(sz(nx * nx));
  for (int64_t i = 1; i <= nx; ++i)
    for (int64_t j = 1; j <= nx; ++j)
      e.push_back(4.0 / h2 + 2.0 * s * std::cos(double(i) * std::numbers::pi * h) +
                  2.0 / h2 * std::cos(double(j) * std::numbers::pi * h));
  return e;
}

CsrMatrix markov_random_walk(int64_t m) {
  if (m < 1) throw KernelError("markov_random_walk: m must be >= 1");
  // Node numbering: (i, j), i + j <= m, row by row of j.
  std::vector<std::vector<int64_t>> id(sz(m + 1), std::vector<int64_t>(sz(m + 1), -1));
  int64_t n = 0;
  for (int64_t j = 0; j <= m; ++j)
    for (int64_t i = 0; i + j <= m; ++i) id[sz(i)][sz(j)] = n++;
  std::vector<std::vector<std::pair<int64_t, double>>> r(sz(n));  // rows of Pᵀ: r[to] gets (from, p)
  for (int64_t j = 0; j <= m; ++j)
    for (int64_t i = 0; i + j <= m; ++i) {
      const int64_t from = id[sz(i)][sz(j)];
      const double pd = double(i + j) / double(2 * m), pu = 0.5 - pd;
      // Down moves: (i-1, j) and (i, j-1); one missing doubles the other.
      const bool di = i > 0, dj = j > 0;
      if (di) r[sz(id[sz(i - 1)][sz(j)])].emplace_back(from, dj ? pd : 2 * pd);
      if (dj) r[sz(id[sz(i)][sz(j - 1)])].emplace_back(from, di ? pd : 2 * pd);
      // Up moves: (i+1, j) and (i, j+1) exist together (both need i + j < m).
      if (i + j < m) {
        r[sz(id[sz(i + 1)][sz(j)])].emplace_back(from, pu);
        r[sz(id[sz(i)][sz(j + 1)])].emplace_back(from, pu);
      }
    }
  return from_rows(n, n, r);
}

std::vector<double> to_dense(const CsrMatrix& a) {
  std::vector<double> d(sz(a.rows * a.cols), 0.0);
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t p = a.row_ptr[sz(r)]; p < a.row_ptr[sz(r + 1)]; ++p)
      d[sz(r * a.cols + a.col[sz(p)])] += a.val[sz(p)];
  return d;
}

std::vector<double> schur_matrix(const std::vector<std::complex<double>>& eigs, double coupling, std::uint64_t seed) {
  const int64_t n = spectrum_dims(eigs);
  if (n < 1 || !(coupling >= 0) || !std::isfinite(coupling))
    throw KernelError("schur_matrix: need a non-empty spectrum and a finite coupling >= 0");
  for (const auto& e : eigs)
    if (e.imag() < 0) throw KernelError("schur_matrix: give each conjugate pair once, with b > 0");
  std::mt19937_64 g(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  // T, row-major: the blocks on the diagonal, Gaussian couplings above them.
  std::vector<double> t(sz(n * n), 0.0);
  std::vector<int64_t> block_end(sz(n));
  int64_t i = 0;
  for (const auto& e : eigs) {
    if (e.imag() == 0) {
      t[sz(i * n + i)] = e.real();
      block_end[sz(i)] = i + 1;
      ++i;
    } else {
      t[sz(i * n + i)] = t[sz((i + 1) * n + i + 1)] = e.real();
      t[sz(i * n + i + 1)] = e.imag();
      t[sz((i + 1) * n + i)] = -e.imag();
      block_end[sz(i)] = block_end[sz(i + 1)] = i + 2;
      i += 2;
    }
  }
  const double c = coupling / std::sqrt(double(n));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t col = block_end[sz(r)]; col < n; ++col) t[sz(r * n + col)] = c * normal(g);
  // Q: the orthogonal factor of a Gaussian matrix.
  std::vector<double> q(sz(n * n)), tau(sz(n));
  for (double& x : q) x = normal(g);
  const auto bn = static_cast<lapack_int>(n);
  if (LAPACKE_dgeqrf(LAPACK_ROW_MAJOR, bn, bn, q.data(), bn, tau.data()) != 0 ||
      LAPACKE_dorgqr(LAPACK_ROW_MAJOR, bn, bn, bn, q.data(), bn, tau.data()) != 0)
    throw KernelError("schur_matrix: the QR factorisation of the random matrix failed");
  std::vector<double> w(sz(n * n)), a(sz(n * n));
  const auto bb = static_cast<blasint>(n);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bb, bb, bb, 1.0, q.data(), bb, t.data(), bb, 0.0, w.data(), bb);
  cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bb, bb, bb, 1.0, w.data(), bb, q.data(), bb, 0.0, a.data(), bb);
  return a;
}

}  // namespace ymlopt::eigen
