// blas.* components: thin, validated wrappers over CBLAS / LAPACKE.
//
// All views are row-major with a leading dimension (ld >= cols), which maps
// directly onto CblasRowMajor calls; no copies are made.
#include "blas/blas.hpp"

#include <cblas.h>
#include <lapacke.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "gemm/gemm.hpp"
#include <ymlopt/kernel_util.hpp>

#if YMLOPT_HAVE_CUDA
#include "nn/nn_cuda.hpp"
#endif
#if YMLOPT_HAVE_CLBLAST
#include "blas/blas_opencl.hpp"
#endif

namespace ymlopt {
namespace {

using kutil::dims;
using kutil::tag;

using kutil::kFloat;

/// A BLAS integer argument; throws when the dimension does not fit.
blasint bi(std::int64_t v) {
  if (v < 0 || v > static_cast<std::int64_t>(std::numeric_limits<blasint>::max()))
    throw KernelError("dimension " + std::to_string(v) + " does not fit the BLAS integer type");
  return static_cast<blasint>(v);
}

/// Leading dimension as BLAS wants it: >= max(1, cols).
blasint ld_of(const TensorView& v) { return bi(std::max<std::int64_t>({v.ld, v.cols, 1})); }

using kutil::first_error;
// ---------------------------------------------------------------- blas.gemm

const std::vector<PortSpec>& gemm_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read, kFloat, false, 2, "A (m x k, or k x m with transa)"},
      {"b", Access::read, kFloat, false, 2, "B (k x n, or n x k with transb)"},
      {"c", Access::read_write, kFloat, false, 2, "C (m x n), updated in place"},
  };
  return p;
}

struct GemmDims {
  std::int64_t m, n, k, kb;
};
GemmDims gemm_dims(const TaskShape& t) {
  const TensorView& a = t.ports[0];
  const TensorView& b = t.ports[1];
  const bool ta = t.args.get_bool("transa"), tb = t.args.get_bool("transb");
  return {ta ? a.cols : a.rows, tb ? b.rows : b.cols, ta ? a.rows : a.cols, tb ? b.cols : b.rows};
}

std::string gemm_check(const TaskShape& t) {
  const auto& s = gemm_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_dtype(s, p, 2, 0)});
      !m.empty())
    return m;
  const bool ta = t.args.get_bool("transa"), tb = t.args.get_bool("transb");
  const std::string op = (ta || tb) ? std::string(" (transa=") + (ta ? "true" : "false") +
                                          ", transb=" + (tb ? "true" : "false") + ")"
                                    : "";
  const GemmDims d = gemm_dims(t);
  if (d.k != d.kb)
    return "port 'b' is " + dims(p[1]) + " but port 'a' is " + dims(p[0]) + ": inner dimensions differ (" +
           std::to_string(d.k) + " != " + std::to_string(d.kb) + ")" + op;
  if (p[2].rows != d.m || p[2].cols != d.n)
    return "port 'c' is " + dims(p[2]) + " but op(a)*op(b) is " + std::to_string(d.m) + "x" +
           std::to_string(d.n) + op;
  return "";
}

Cost gemm_cost(const TaskShape& t) {
  if (t.ports.size() != gemm_ports().size()) return {};
  const GemmDims d = gemm_dims(t);
  Cost c = kutil::io_cost(gemm_ports(), t, 2.0 * double(d.m) * double(d.n) * double(d.k));
  if (t.ports[0].dtype == DType::f64 && gemm::keeps_panels(d.m, d.n, d.k, t.args.get_float("alpha")))
    c.kept_ports = 0b011;  // a and b, packed once per content (gemm.hpp)
  return c;
}

void gemm_cpu(KernelContext& ctx) {
  kutil::validate(ctx, gemm_ports(), gemm_check);
  const TensorView &a = ctx.port(0), &b = ctx.port(1), &c = ctx.port(2);
  const bool ta = ctx.arg_bool("transa"), tb = ctx.arg_bool("transb");
  const std::int64_t m = c.rows, n = c.cols, k = ta ? a.rows : a.cols;
  if (m == 0 || n == 0) return;
  const double alpha = ctx.arg_float("alpha"), beta = ctx.arg_float("beta");
  kutil::dispatch_float(c.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    if constexpr (std::is_same_v<T, double>)  // tiles read by several tasks: packed once (gemm.hpp)
      gemm::gemm(ta, tb, m, n, k, alpha, a.ptr<T>(), ld_of(a), b.ptr<T>(), ld_of(b), beta, c.ptr<T>(), ld_of(c),
                 gemm::OperandIds{a.content_id, b.content_id});
    else
      gemm::gemm(ta, tb, m, n, k, T(alpha), a.ptr<T>(), ld_of(a), b.ptr<T>(), ld_of(b), T(beta), c.ptr<T>(), ld_of(c));
  });
}

#if YMLOPT_HAVE_CUDA
// CUDA kernel: cuBLAS sgemm (FP32, no TF32) on device pointers, on ctx.cuda_stream(); f32 only.
std::string gemm_cuda_check(const TaskShape& t) {
  if (t.ports.size() != gemm_ports().size()) return "wrong number of ports";
  if (t.ports[0].dtype != DType::f32) return std::string("CUDA kernel is f32 only, a is ") + dtype_name(t.ports[0].dtype);
  return "";
}

void gemm_cuda(KernelContext& ctx) {
  kutil::validate(ctx, gemm_ports(), gemm_check);
  if (auto m = gemm_cuda_check(TaskShape{ctx.ports(), ctx.args()}); !m.empty()) throw KernelError(m);
  const TensorView &a = ctx.port(0), &b = ctx.port(1), &c = ctx.port(2);
  const bool ta = ctx.arg_bool("transa"), tb = ctx.arg_bool("transb");
  const std::int64_t m = c.rows, n = c.cols, k = ta ? a.rows : a.cols;
  if (m == 0 || n == 0) return;
  nn::cuda::gemm_f32_op(ta, tb, static_cast<const float*>(a.data), ld_of(a), static_cast<const float*>(b.data),
                        ld_of(b), static_cast<float*>(c.data), ld_of(c), m, n, k, float(ctx.arg_float("alpha")),
                        float(ctx.arg_float("beta")), ctx.cuda_stream());
}
#endif

// ---------------------------------------------------------------- blas.axpy

const std::vector<PortSpec>& axpy_ports() {
  static const std::vector<PortSpec> p = {
      {"x", Access::read, kFloat, false, 8, "x"},
      {"y", Access::read_write, kFloat, false, 8, "y, same shape as x; y += alpha*x"},
  };
  return p;
}

std::string axpy_check(const TaskShape& t) {
  const auto& s = axpy_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  return first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0),
                      kutil::same_shape(s, p, 1, 0)});
}

Cost axpy_cost(const TaskShape& t) {
  if (t.ports.size() != axpy_ports().size()) return {};
  return kutil::io_cost(axpy_ports(), t, 2.0 * double(t.ports[0].rows) * double(t.ports[0].cols));
}

template <class T>
void axpy_run(std::int64_t n, T alpha, const T* x, T* y) {
  // chunks that fit the BLAS integer type
  const std::int64_t chunk = std::numeric_limits<blasint>::max();
  for (std::int64_t off = 0; off < n; off += chunk) {
    const blasint len = static_cast<blasint>(std::min(chunk, n - off));
    if constexpr (std::is_same_v<T, float>) cblas_saxpy(len, alpha, x + off, 1, y + off, 1);
    else cblas_daxpy(len, alpha, x + off, 1, y + off, 1);
  }
}

void axpy_cpu(KernelContext& ctx) {
  kutil::validate(ctx, axpy_ports(), axpy_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(1);
  if (x.size() == 0) return;
  kutil::dispatch_float(x.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    const T alpha = static_cast<T>(ctx.arg_float("alpha"));
    const T* xp = x.ptr<T>();
    T* yp = y.ptr<T>();
    if (x.contiguous() && y.contiguous()) {
      axpy_run<T>(x.size(), alpha, xp, yp);
    } else {
      for (std::int64_t r = 0; r < x.rows; ++r) axpy_run<T>(x.cols, alpha, xp + r * x.ld, yp + r * y.ld);
    }
  });
}

// ---------------------------------------------------------------- blas.potrf

const std::vector<PortSpec>& potrf_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read_write, kFloat, false, 2,
       "symmetric positive definite matrix (lower triangle read); replaced by L, upper triangle zeroed"},
  };
  return p;
}

/// "" when the one port is a square f32/f64 matrix (potrf, getrf, getri).
std::string square_check(const std::vector<PortSpec>& s, const TaskShape& t) {
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  return first_error({kutil::float_dtype(s, t.ports, 0), kutil::square(s, t.ports, 0)});
}

std::string potrf_check(const TaskShape& t) { return square_check(potrf_ports(), t); }

Cost potrf_cost(const TaskShape& t) {
  if (t.ports.size() != potrf_ports().size()) return {};
  const double n = double(t.ports[0].rows);
  return kutil::io_cost(potrf_ports(), t, n * n * n / 3.0);
}

void potrf_cpu(KernelContext& ctx) {
  kutil::validate(ctx, potrf_ports(), potrf_check);
  const TensorView& a = ctx.port(0);
  const std::int64_t n = a.rows;
  if (n == 0) return;
  kutil::dispatch_float(a.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    T* ap = a.ptr<T>();
    const lapack_int ld = ld_of(a);
    // A row-major matrix with leading dimension ld is its transpose in
    // column-major order; A is symmetric, so factoring the column-major upper
    // triangle (A = U^T U) writes U^T = L into the row-major lower triangle
    // without the transposed copy LAPACKE makes for LAPACK_ROW_MAJOR.
    lapack_int info;
    if constexpr (std::is_same_v<T, float>) info = LAPACKE_spotrf(LAPACK_COL_MAJOR, 'U', bi(n), ap, ld);
    else info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'U', bi(n), ap, ld);
    if (info > 0) throw KernelError("matrix is not positive definite (leading minor " + std::to_string(info) + ")");
    if (info < 0) throw KernelError("potrf: illegal argument " + std::to_string(-info));
    for (std::int64_t i = 0; i + 1 < n; ++i) std::fill(ap + i * a.ld + i + 1, ap + i * a.ld + n, T{0});
  });
}

// ---------------------------------------------------------------- blas.getrf

const std::vector<PortSpec>& getrf_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read_write, kFloat, false, 2,
       "square matrix; replaced by L (strictly below the diagonal, unit diagonal implied) and U (the rest)"},
  };
  return p;
}

std::string getrf_check(const TaskShape& t) { return square_check(getrf_ports(), t); }

Cost getrf_cost(const TaskShape& t) {
  if (t.ports.size() != getrf_ports().size()) return {};
  const double n = double(t.ports[0].rows);
  return kutil::io_cost(getrf_ports(), t, 2.0 * n * n * n / 3.0);
}

/// Right-looking LU without pivoting of the row-major n x n matrix a (leading
/// dimension ld), in panels of nb columns: each panel is factored column by
/// column, then U12 = L11^-1 A12 (trsm) and A22 -= L21 U12 (gemm) update the rest.
template <class T>
void getrf_nopiv(std::int64_t n, T* a, std::int64_t ld) {
  constexpr std::int64_t nb = 64;
  for (std::int64_t k0 = 0; k0 < n; k0 += nb) {
    const std::int64_t kb = std::min(nb, n - k0), k1 = k0 + kb;
    for (std::int64_t k = k0; k < k1; ++k) {
      const T p = a[k * ld + k];
      if (p == T(0) || !std::isfinite(p))
        throw KernelError("pivot U(" + std::to_string(k) + "," + std::to_string(k) + ") is " + std::to_string(double(p)) +
                          ": blas.getrf does not pivot (the leading minors must be nonzero, as for a diagonally "
                          "dominant matrix: init=\"dominant\")");
      for (std::int64_t i = k + 1; i < n; ++i) {
        T* ri = a + i * ld;
        const T l = ri[k] /= p;
        const T* rk = a + k * ld;
        for (std::int64_t j = k + 1; j < k1; ++j) ri[j] -= l * rk[j];
      }
    }
    if (k1 == n) break;
    const blasint m2 = bi(n - k1), b = bi(kb);
    if constexpr (std::is_same_v<T, float>) {
      cblas_strsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, b, m2, 1.0f, a + k0 * ld + k0, bi(ld),
                  a + k0 * ld + k1, bi(ld));
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m2, m2, b, -1.0f, a + k1 * ld + k0, bi(ld),
                  a + k0 * ld + k1, bi(ld), 1.0f, a + k1 * ld + k1, bi(ld));
    } else {
      cblas_dtrsm(CblasRowMajor, CblasLeft, CblasLower, CblasNoTrans, CblasUnit, b, m2, 1.0, a + k0 * ld + k0, bi(ld),
                  a + k0 * ld + k1, bi(ld));
      cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m2, m2, b, -1.0, a + k1 * ld + k0, bi(ld),
                  a + k0 * ld + k1, bi(ld), 1.0, a + k1 * ld + k1, bi(ld));
    }
  }
}

void getrf_cpu(KernelContext& ctx) {
  kutil::validate(ctx, getrf_ports(), getrf_check);
  const TensorView& a = ctx.port(0);
  if (a.rows == 0) return;
  kutil::dispatch_float(a.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    getrf_nopiv<T>(a.rows, a.ptr<T>(), std::max<std::int64_t>(a.ld, a.cols));
  });
}

// ---------------------------------------------------------------- blas.getri

const std::vector<PortSpec>& getri_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read_write, kFloat, false, 2, "square nonsingular matrix, replaced by its inverse"},
  };
  return p;
}

std::string getri_check(const TaskShape& t) { return square_check(getri_ports(), t); }

Cost getri_cost(const TaskShape& t) {
  if (t.ports.size() != getri_ports().size()) return {};
  const double n = double(t.ports[0].rows);
  return kutil::io_cost(getri_ports(), t, 2.0 * n * n * n);  // getrf 2n³/3 + getri 4n³/3
}

void getri_cpu(KernelContext& ctx) {
  kutil::validate(ctx, getri_ports(), getri_check);
  const TensorView& a = ctx.port(0);
  const std::int64_t n = a.rows;
  if (n == 0) return;
  kutil::dispatch_float(a.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    // the row-major A is A^T in column-major order, and inv(A^T) = inv(A)^T: the
    // column-major inverse in place is the row-major inverse, without a copy
    std::vector<lapack_int> ipiv(static_cast<std::size_t>(n));
    T* ap = a.ptr<T>();
    const lapack_int ld = ld_of(a);
    lapack_int info;
    if constexpr (std::is_same_v<T, float>) info = LAPACKE_sgetrf(LAPACK_COL_MAJOR, bi(n), bi(n), ap, ld, ipiv.data());
    else info = LAPACKE_dgetrf(LAPACK_COL_MAJOR, bi(n), bi(n), ap, ld, ipiv.data());
    if (info > 0) throw KernelError("matrix is singular (U(" + std::to_string(info - 1) + "," + std::to_string(info - 1) + ") is 0 after partial pivoting)");
    if (info < 0) throw KernelError("getrf: illegal argument " + std::to_string(-info));
    if constexpr (std::is_same_v<T, float>) info = LAPACKE_sgetri(LAPACK_COL_MAJOR, bi(n), ap, ld, ipiv.data());
    else info = LAPACKE_dgetri(LAPACK_COL_MAJOR, bi(n), ap, ld, ipiv.data());
    if (info != 0) throw KernelError("getri: info " + std::to_string(info));
  });
}

// ---------------------------------------------------------------- blas.trsm

const std::vector<PortSpec>& trsm_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read, kFloat, false, 2, "triangular matrix (the diagonal L tile)"},
      {"b", Access::read_write, kFloat, false, 2, "right-hand sides, overwritten by the solution X"},
  };
  return p;
}

std::string trsm_check(const TaskShape& t) {
  const auto& s = trsm_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::one_of(t.args, "side", {"left", "right"}),
                            kutil::one_of(t.args, "uplo", {"lower", "upper"}),
                            kutil::one_of(t.args, "trans", {"notrans", "trans"}),
                            kutil::one_of(t.args, "diag", {"nonunit", "unit"}), kutil::float_dtype(s, p, 0),
                            kutil::same_dtype(s, p, 1, 0), kutil::square(s, p, 0)});
      !m.empty())
    return m;
  const bool right = t.args.get_string("side") == "right";
  const std::int64_t need = right ? p[1].cols : p[1].rows;
  if (p[0].rows != need)
    return "port 'a' is " + dims(p[0]) + " but port 'b' is " + dims(p[1]) + ": with side='" +
           t.args.get_string("side") + "' 'a' must be " + std::to_string(need) + "x" + std::to_string(need) +
           " (the number of " + (right ? "columns" : "rows") + " of 'b')";
  return "";
}

Cost trsm_cost(const TaskShape& t) {
  if (t.ports.size() != trsm_ports().size()) return {};
  const TensorView& b = t.ports[1];
  const bool right = t.args.get_string("side") == "right";
  const double m = double(b.rows), n = double(b.cols);
  return kutil::io_cost(trsm_ports(), t, right ? m * n * n : n * m * m);
}

void trsm_cpu(KernelContext& ctx) {
  kutil::validate(ctx, trsm_ports(), trsm_check);
  const TensorView &a = ctx.port(0), &b = ctx.port(1);
  if (b.size() == 0) return;
  const CBLAS_SIDE side = ctx.arg_string("side") == "right" ? CblasRight : CblasLeft;
  const CBLAS_UPLO uplo = ctx.arg_string("uplo") == "lower" ? CblasLower : CblasUpper;
  const CBLAS_TRANSPOSE trans = ctx.arg_string("trans") == "trans" ? CblasTrans : CblasNoTrans;
  const CBLAS_DIAG diag = ctx.arg_string("diag") == "unit" ? CblasUnit : CblasNonUnit;
  const double alpha = ctx.arg_float("alpha");
  kutil::dispatch_float(a.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    if constexpr (std::is_same_v<T, float>)
      cblas_strsm(CblasRowMajor, side, uplo, trans, diag, bi(b.rows), bi(b.cols), float(alpha), a.ptr<float>(),
                  ld_of(a), b.ptr<float>(), ld_of(b));
    else
      cblas_dtrsm(CblasRowMajor, side, uplo, trans, diag, bi(b.rows), bi(b.cols), alpha, a.ptr<double>(), ld_of(a),
                  b.ptr<double>(), ld_of(b));
  });
}

// ---------------------------------------------------------------- blas.syrk

const std::vector<PortSpec>& syrk_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read, kFloat, false, 2, "A (n x k, or k x n with trans='trans')"},
      {"c", Access::read_write, kFloat, false, 2, "C (n x n); only the 'uplo' triangle is updated"},
  };
  return p;
}

std::string syrk_check(const TaskShape& t) {
  const auto& s = syrk_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::one_of(t.args, "uplo", {"lower", "upper"}),
                            kutil::one_of(t.args, "trans", {"notrans", "trans"}), kutil::float_dtype(s, p, 0),
                            kutil::same_dtype(s, p, 1, 0), kutil::square(s, p, 1)});
      !m.empty())
    return m;
  const bool tr = t.args.get_string("trans") == "trans";
  const std::int64_t n = tr ? p[0].cols : p[0].rows;
  if (p[1].rows != n)
    return "port 'c' is " + dims(p[1]) + " but port 'a' is " + dims(p[0]) + ": " +
           (tr ? "a^T*a" : "a*a^T") + " is " + std::to_string(n) + "x" + std::to_string(n);
  return "";
}

Cost syrk_cost(const TaskShape& t) {
  if (t.ports.size() != syrk_ports().size()) return {};
  const TensorView& a = t.ports[0];
  const bool tr = t.args.get_string("trans") == "trans";
  const double n = double(tr ? a.cols : a.rows), k = double(tr ? a.rows : a.cols);
  return kutil::io_cost(syrk_ports(), t, n * (n + 1) * k);
}

void syrk_cpu(KernelContext& ctx) {
  kutil::validate(ctx, syrk_ports(), syrk_check);
  const TensorView &a = ctx.port(0), &c = ctx.port(1);
  const bool tr = ctx.arg_string("trans") == "trans";
  const std::int64_t n = c.rows, k = tr ? a.rows : a.cols;
  if (n == 0) return;
  const CBLAS_UPLO uplo = ctx.arg_string("uplo") == "lower" ? CblasLower : CblasUpper;
  const CBLAS_TRANSPOSE trans = tr ? CblasTrans : CblasNoTrans;
  const double alpha = ctx.arg_float("alpha"), beta = ctx.arg_float("beta");
  kutil::dispatch_float(a.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    if constexpr (std::is_same_v<T, float>)
      cblas_ssyrk(CblasRowMajor, uplo, trans, bi(n), bi(k), float(alpha), a.ptr<float>(), ld_of(a), float(beta),
                  c.ptr<float>(), ld_of(c));
    else
      cblas_dsyrk(CblasRowMajor, uplo, trans, bi(n), bi(k), alpha, a.ptr<double>(), ld_of(a), beta,
                  c.ptr<double>(), ld_of(c));
  });
}

// ---------------------------------------------------------------- OpenCL kernels

// Validated like the CPU kernels, then CLBlast (blas_opencl.cpp).
#if YMLOPT_HAVE_CLBLAST
void gemm_opencl(KernelContext& ctx) {
  kutil::validate(ctx, gemm_ports(), gemm_check);
  blas::opencl::gemm(ctx);
}
void syrk_opencl(KernelContext& ctx) {
  kutil::validate(ctx, syrk_ports(), syrk_check);
  blas::opencl::syrk(ctx);
}
void trsm_opencl(KernelContext& ctx) {
  kutil::validate(ctx, trsm_ports(), trsm_check);
  blas::opencl::trsm(ctx);
}
#define YMLOPT_OPENCL_KERNEL(op, check) op##_opencl, check
#else
#define YMLOPT_OPENCL_KERNEL(op, check) nullptr, nullptr
#endif

// ---------------------------------------------------------------- rates
// The performance model prices blas.gemm at the GEMM rate of A [m, k] times B
// [k, n] (n from C), and the other calls at that of a square GEMM of their size.

TaskRate square_gemm_rate(const TaskShape& t) {
  TaskRate r;
  const TensorView& a = t.ports[0];
  if (!a.bound()) return r;
  r.kind = RateKind::gemm;
  r.name = a.dtype == DType::f64 ? "dgemm" : "sgemm";
  r.m = a.rows;
  r.k = a.cols;
  r.n = a.cols;
  return r;
}

TaskRate gemm_rate(const TaskShape& t) {
  TaskRate r = square_gemm_rate(t);
  if (r.kind == RateKind::gemm && t.ports[2].bound()) r.n = t.ports[2].cols;
  return r;
}

}  // namespace

void register_blas(Registry& reg) {
#if YMLOPT_HAVE_CUDA
  const KernelFn gemm_gpu = gemm_cuda;
  std::string (*const gemm_gpu_check)(const TaskShape&) = gemm_cuda_check;
#else
  const KernelFn gemm_gpu = nullptr;
  std::string (*const gemm_gpu_check)(const TaskShape&) = nullptr;
#endif
  // with the OpenCL kernel and its opencl_check where there is one (YMLOPT_OPENCL_KERNEL)
  auto add = [&reg](ComponentSpec s, TaskRate (*rate)(const TaskShape&), KernelFn opencl = nullptr,
                    std::string (*opencl_check)(const TaskShape&) = nullptr) {
    s.rate = rate;
    s.opencl = opencl;
    if (opencl_check) s.opencl_check = opencl_check;
    reg.add(std::move(s));
  };
  add(kutil::make_component(
          "blas.gemm",
          "C = alpha*op(A)*op(B) + beta*C (BLAS semantics: beta defaults to 0; set beta=1 to accumulate tiles)",
          gemm_ports(),
          {{"alpha", ParamType::float_, "1", false, "scale of op(A)*op(B)"},
           {"beta", ParamType::float_, "0", false, "scale of the previous C (0: C is overwritten)"},
           {"transa", ParamType::bool_, "false", false, "use A^T"},
           {"transb", ParamType::bool_, "false", false, "use B^T"}},
          gemm_cpu, gemm_check, gemm_cost, gemm_gpu, gemm_gpu_check),
      gemm_rate, YMLOPT_OPENCL_KERNEL(gemm, blas::opencl::gemm_check));
  add(kutil::make_component("blas.axpy", "y += alpha*x", axpy_ports(),
                            {{"alpha", ParamType::float_, "1", false, "scale of x"}}, axpy_cpu, axpy_check,
                            axpy_cost),
      square_gemm_rate);
  // the in-place factorisations of one square tile, without parameters
  add(kutil::make_component("blas.potrf",
                            "in-place lower Cholesky factorization A = L*L^T; the tile holds exactly L afterwards",
                            potrf_ports(), {}, potrf_cpu, potrf_check, potrf_cost),
      square_gemm_rate);
  add(kutil::make_component("blas.getrf",
                            "in-place LU factorization A = L*U without pivoting (tiled LU, Gauss-Jordan): L unit "
                            "lower below the diagonal, U on and above it; a zero pivot is an error",
                            getrf_ports(), {}, getrf_cpu, getrf_check, getrf_cost),
      square_gemm_rate);
  add(kutil::make_component("blas.getri",
                            "in-place inverse of a square tile (LAPACK getrf with partial pivoting inside the tile, "
                            "then getri); a singular matrix is an error",
                            getri_ports(), {}, getri_cpu, getri_check, getri_cost),
      square_gemm_rate);
  add(kutil::make_component("blas.trsm",
                            "triangular solve: op(A)*X = alpha*B (side=left) or X*op(A) = alpha*B (side=right); "
                            "the defaults solve X*L^T = B (right-looking tiled Cholesky)",
                            trsm_ports(),
                            {{"side", ParamType::string_, "right", false, "'left' or 'right'"},
                             {"uplo", ParamType::string_, "lower", false, "'lower' or 'upper' triangle of a"},
                             {"trans", ParamType::string_, "trans", false, "'notrans' or 'trans'"},
                             {"diag", ParamType::string_, "nonunit", false, "'nonunit' or 'unit' diagonal"},
                             {"alpha", ParamType::float_, "1", false, "scale of b"}},
                            trsm_cpu, trsm_check, trsm_cost),
      square_gemm_rate, YMLOPT_OPENCL_KERNEL(trsm, nullptr));
  add(kutil::make_component("blas.syrk",
                            "C = alpha*A*A^T + beta*C (trans=notrans) or alpha*A^T*A + beta*C, one triangle only; "
                            "defaults alpha=1, beta=1 (tiled Cholesky uses alpha=-1)",
                            syrk_ports(),
                            {{"alpha", ParamType::float_, "1", false, "scale of A*A^T"},
                             {"beta", ParamType::float_, "1", false, "scale of the previous C"},
                             {"uplo", ParamType::string_, "lower", false, "'lower' or 'upper': the triangle updated"},
                             {"trans", ParamType::string_, "notrans", false, "'notrans' (A*A^T) or 'trans' (A^T*A)"}},
                            syrk_cpu, syrk_check, syrk_cost),
      square_gemm_rate, YMLOPT_OPENCL_KERNEL(syrk, blas::opencl::syrk_check));
}

}  // namespace ymlopt
