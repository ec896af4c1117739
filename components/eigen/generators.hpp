// Test matrices for the eigensolvers: sparse non-symmetric matrices with a
// prescribed spectrum, and the classic operators of the ARPACK examples.
//
//   using namespace ymlopt::eigen;
//   auto eigs = random_spectrum({{1.0, 0}, {0.99, 0.05}}, 396, 0.95, 0.3, 7);  // 400 dims
//   CsrMatrix a = matrix_with_spectrum(eigs, {.seed = 3});       // spectrum exactly eigs
//   CsrMatrix cd = convection_diffusion_2d(30, 10.0);            // n = 900
//   auto exact = convection_diffusion_2d_eigenvalues(30, 10.0);  // analytic
//   CsrMatrix mk = markov_random_walk(20);                       // n = 231, eigenvalue 1
#pragma once

#include <complex>
#include <cstdint>
#include <vector>

#include "eigen/eigen.hpp"

namespace ymlopt::eigen {

/// Options of matrix_with_spectrum().
struct SpectrumMatrixOptions {
  std::uint64_t seed = 1;
  std::int64_t upper_per_row = 3;  // random couplings per first-level row (into the second level)
  double upper_scale = 0.5;        // their size: uniform in ±upper_scale / sqrt(upper_per_row)
  bool permute = true;             // hide the triangular structure by a random symmetric permutation
};

/// A sparse real matrix whose eigenvalues are exactly `eigs`: A = S T S⁻¹ with
/// T block upper triangular: a real λ is a 1x1 diagonal block, a pair a ± ib
/// (given once, b > 0) the block [[a, b], [-b, a]]; each row of the first half
/// of the blocks (the first (count + 1) / 2 entries of `eigs`) gets
/// `upper_per_row` random couplings into the columns of the second half, so A
/// is not normal but the coupling is nilpotent of index 2 and eigenvalue
/// condition numbers grow like |coupling| / gap, not exponentially in n as
/// with a general random triangular part. S = P D: P a random permutation, D
/// diagonal in [1, 2] (condition <= 2, no fill). n = (real values) + 2 (pairs);
/// nnz <= n (upper_per_row + 2). Values with b < 0 are rejected (give each pair once).
CsrMatrix matrix_with_spectrum(const std::vector<std::complex<double>>& eigs, const SpectrumMatrixOptions& opt = {});

/// `top` (a pair a ± ib given once, b > 0) followed by eigenvalues filling
/// `bulk_dims` more dimensions, uniform in the disc |z| <= radius, a fraction
/// `complex_fraction` of them as conjugate pairs. Clustered spectrum: radius just
/// below |top|; close to the origin: a small radius (and small top values).
std::vector<std::complex<double>> random_spectrum(const std::vector<std::complex<double>>& top,
                                                  std::int64_t bulk_dims, double radius, double complex_fraction,
                                                  std::uint64_t seed);

/// `top` followed by eigenvalues filling `bulk_dims` more dimensions, uniform in
/// the box re in [re_lo, re_hi], |im| <= im_max (a fraction `complex_fraction`
/// of them as conjugate pairs): a convection-dominated operator's shape, where
/// the wanted end is separated from the bulk only on one side.
std::vector<std::complex<double>> random_spectrum_box(const std::vector<std::complex<double>>& top,
                                                      std::int64_t bulk_dims, double re_lo, double re_hi,
                                                      double im_max, double complex_fraction, std::uint64_t seed);

/// Number of dimensions a spectrum list fills (a pair with b > 0 counts 2).
std::int64_t spectrum_dims(const std::vector<std::complex<double>>& eigs);

/// The 2-D convection-diffusion operator of ARPACK's dndrv1: -Δu + rho ∂u/∂x on
/// the unit square, Dirichlet, central differences on an nx x nx interior grid
/// (h = 1/(nx+1)), n = nx²: 4/h² on the diagonal, -1/h² ± rho/(2h) to the x
/// neighbours, -1/h² to the y neighbours.
CsrMatrix convection_diffusion_2d(std::int64_t nx, double rho);

/// Its n eigenvalues in closed form: 4/h² + 2 sqrt(dl du) cos(iπh) + (2/h²) cos(jπh),
/// i, j = 1..nx, dl du = 1/h⁴ - rho²/(4h²) (a negative product gives complex pairs).
std::vector<std::complex<double>> convection_diffusion_2d_eigenvalues(std::int64_t nx, double rho);

/// Saad's random walk on the triangular grid {(i, j): i + j <= m} (the "Markov"
/// test matrix of ARPACK's examples), n = (m+1)(m+2)/2: from (i, j) the walk
/// steps to (i-1, j) or (i, j-1) with probability (i+j)/(2m) each and to (i+1, j)
/// or (i, j+1) with 1/2 - (i+j)/(2m) each, a probability doubled when the other
/// move of its pair leaves the grid. Returned transposed (column-stochastic), so
/// 1 is an eigenvalue (the stationary distribution); -1 too (the grid is bipartite):
/// ask for the largest real part.
CsrMatrix markov_random_walk(std::int64_t m);

/// A dense row-major A = Q T Qᵀ whose eigenvalues are exactly `eigs` (a pair a
/// ± ib given once, b > 0): T upper quasi-triangular (λ on the diagonal, a pair
/// as the block [[a, b], [-b, a]]) with Gaussian entries times
/// coupling / sqrt(n) above its diagonal blocks, so a value given twice is
/// generically defective (one eigenvector); Q the orthogonal factor of a
/// Gaussian matrix. n = spectrum_dims(eigs); O(n³) work, for tests.
///
///   auto a = schur_matrix(random_spectrum({{1, 0}, {0.99, 0}, {-0.985, 0}}, 397, 0.96, 0.3, 1), 1.0, 2);
std::vector<double> schur_matrix(const std::vector<std::complex<double>>& eigs, double coupling, std::uint64_t seed);

/// The dense row-major copy of a CSR matrix (for LAPACK references on small sizes).
std::vector<double> to_dense(const CsrMatrix& a);

}  // namespace ymlopt::eigen
