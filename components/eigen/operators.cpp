// The operators of eigen.hpp (dense, Gram, CSR), the random vectors the
// solvers start from, and EigenResult's residual.
#include "eigen/eigen.hpp"
#include "eigen/solver_util.hpp"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace ymlopt::eigen {
using namespace detail;

double EigenResult::max_residual() const {
  double r = 0;
  for (double x : residuals) r = std::max(r, x);
  return r;
}

std::vector<double> random_vector(int64_t n, std::uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> d(0.0, 1.0);
  std::vector<double> v(sz(n));
  for (double& x : v) x = d(gen);
  return v;
}

// ---------------------------------------------------------------- operators

LinearOperator dense_operator(const double* a, int64_t n, int64_t ld) {
  return {n, [a, n, ld](const double* x, double* y) {
            cblas_dgemv(CblasRowMajor, CblasNoTrans, bi(n), bi(n), 1.0, a, bi(std::max<int64_t>(ld, 1)), x, 1, 0.0,
                        y, 1);
          }};
}

LinearOperator gram_operator(const double* x, int64_t m, int64_t n, int64_t ld) {
  return {n, [x, m, n, ld](const double* v, double* y) {
            if (m == 0) {
              std::fill(y, y + n, 0.0);
              return;
            }
            thread_local std::vector<double> tmp;  // per thread: copies of the operator may run concurrently
            tmp.resize(sz(m));
            const blasint l = bi(std::max<int64_t>(ld, 1));
            cblas_dgemv(CblasRowMajor, CblasNoTrans, bi(m), bi(n), 1.0, x, l, v, 1, 0.0, tmp.data(), 1);
            cblas_dgemv(CblasRowMajor, CblasTrans, bi(m), bi(n), 1.0, x, l, tmp.data(), 1, 0.0, y, 1);
          }};
}

CsrMatrix CsrMatrix::from_dense(const double* a, int64_t rows, int64_t cols, int64_t ld, double drop) {
  CsrMatrix s;
  s.rows = rows;
  s.cols = cols;
  s.row_ptr.assign(sz(rows + 1), 0);
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) {
      const double v = a[i * ld + j];
      if (std::abs(v) > drop) {
        s.col.push_back(j);
        s.val.push_back(v);
      }
    }
    s.row_ptr[sz(i + 1)] = static_cast<int64_t>(s.val.size());
  }
  return s;
}

LinearOperator csr_operator(const CsrMatrix& s) {
  if (s.rows != s.cols)
    throw KernelError("csr_operator: the matrix is " + std::to_string(s.rows) + "x" + std::to_string(s.cols) +
                      ": a square matrix is required");
  if (static_cast<int64_t>(s.row_ptr.size()) != s.rows + 1)
    throw KernelError("csr_operator: row_ptr has " + std::to_string(s.row_ptr.size()) + " entries, expected " +
                      std::to_string(s.rows + 1));
  const CsrMatrix* p = &s;
  return {s.rows, [p](const double* x, double* y) {
            const int64_t* rp = p->row_ptr.data();
            const int64_t* ci = p->col.data();
            const double* va = p->val.data();
            for (int64_t i = 0; i < p->rows; ++i) {
              double acc = 0;
              for (int64_t e = rp[i]; e < rp[i + 1]; ++e) acc += va[e] * x[ci[e]];
              y[i] = acc;
            }
          }};
}

}  // namespace ymlopt::eigen
