// blas.gemm, blas.syrk and blas.trsm on OpenCL: CLBlast's row-major S/D calls
// on the task's queue, with each port's element offset and leading dimension.
#if YMLOPT_HAVE_CLBLAST
#include "blas/blas_opencl.hpp"

#include <cstdint>
#include <type_traits>

#include <ymlopt/kernel_util.hpp>

#include "opencl/clblast.hpp"

namespace ymlopt::blas::opencl {
namespace {

namespace cl = ymlopt::opencl;

CLBlastTranspose transpose(bool t) { return t ? CLBlastTransposeYes : CLBlastTransposeNo; }
CLBlastTriangle triangle(const std::string& uplo) { return uplo == "lower" ? CLBlastTriangleLower : CLBlastTriangleUpper; }

/// The dimension k of a gemm task (columns of op(a)).
std::int64_t gemm_k(const TaskShape& t) {
  return t.args.get_bool("transa") ? t.ports[0].rows : t.ports[0].cols;
}

/// The dimension k of a syrk task.
std::int64_t syrk_k(const TaskShape& t) {
  return t.args.get_string("trans") == "trans" ? t.ports[0].rows : t.ports[0].cols;
}

/// Throws check's reason for a task the OpenCL kernel does not handle.
void require(const KernelContext& ctx, std::string (*check)(const TaskShape&)) {
  if (auto m = check(TaskShape{ctx.ports(), ctx.args()}); !m.empty()) throw KernelError(m);
}

}  // namespace

std::string gemm_check(const TaskShape& t) {
  if (t.ports.size() != 3) return "wrong number of ports";
  if (gemm_k(t) == 0 && t.ports[2].size() > 0) return "k = 0: C = beta*C runs on a CPU (CLBlast needs k > 0)";
  return "";
}

void gemm(KernelContext& ctx) {
  require(ctx, gemm_check);
  const TensorView& c = ctx.port(2);
  if (c.size() == 0) return;
  cl_command_queue q = cl::task_queue(ctx);  // CLBlast takes a cl_command_queue*
  cl::require_dtype(q, c.dtype);
  const bool ta = ctx.arg_bool("transa"), tb = ctx.arg_bool("transb");
  const std::size_t m = std::size_t(c.rows), n = std::size_t(c.cols);
  const std::size_t k = std::size_t(gemm_k(TaskShape{ctx.ports(), ctx.args()}));
  const cl::Operand a = cl::operand(ctx, 0), b = cl::operand(ctx, 1), co = cl::operand(ctx, 2);
  const double alpha = ctx.arg_float("alpha"), beta = ctx.arg_float("beta");
  kutil::dispatch_float(c.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    if constexpr (std::is_same_v<T, float>)
      cl::clblast_check(CLBlastSgemm(CLBlastLayoutRowMajor, transpose(ta), transpose(tb), m, n, k, float(alpha), a.mem,
                                     a.offset, a.ld, b.mem, b.offset, b.ld, float(beta), co.mem, co.offset, co.ld, &q,
                                     nullptr),
                        "CLBlastSgemm");
    else
      cl::clblast_check(CLBlastDgemm(CLBlastLayoutRowMajor, transpose(ta), transpose(tb), m, n, k, alpha, a.mem,
                                     a.offset, a.ld, b.mem, b.offset, b.ld, beta, co.mem, co.offset, co.ld, &q, nullptr),
                        "CLBlastDgemm");
  });
}

std::string syrk_check(const TaskShape& t) {
  if (t.ports.size() != 2) return "wrong number of ports";
  if (syrk_k(t) == 0 && t.ports[1].size() > 0) return "k = 0: C = beta*C runs on a CPU (CLBlast needs k > 0)";
  return "";
}

void syrk(KernelContext& ctx) {
  require(ctx, syrk_check);
  const TensorView& c = ctx.port(1);
  if (c.size() == 0) return;
  cl_command_queue q = cl::task_queue(ctx);  // CLBlast takes a cl_command_queue*
  cl::require_dtype(q, c.dtype);
  const bool tr = ctx.arg_string("trans") == "trans";
  const CLBlastTriangle uplo = triangle(ctx.arg_string("uplo"));
  const std::size_t n = std::size_t(c.rows), k = std::size_t(syrk_k(TaskShape{ctx.ports(), ctx.args()}));
  const cl::Operand a = cl::operand(ctx, 0), co = cl::operand(ctx, 1);
  const double alpha = ctx.arg_float("alpha"), beta = ctx.arg_float("beta");
  kutil::dispatch_float(c.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    if constexpr (std::is_same_v<T, float>)
      cl::clblast_check(CLBlastSsyrk(CLBlastLayoutRowMajor, uplo, transpose(tr), n, k, float(alpha), a.mem, a.offset,
                                     a.ld, float(beta), co.mem, co.offset, co.ld, &q, nullptr),
                        "CLBlastSsyrk");
    else
      cl::clblast_check(CLBlastDsyrk(CLBlastLayoutRowMajor, uplo, transpose(tr), n, k, alpha, a.mem, a.offset, a.ld,
                                     beta, co.mem, co.offset, co.ld, &q, nullptr),
                        "CLBlastDsyrk");
  });
}

// CLBlast's TRSM copies b's buffer from its start to the end of the tile into
// a temporary, solves there, and copies all of it back: on a tile of a larger
// buffer that moves the whole prefix twice and writes back its neighbours as
// they were when the call began. It solves a packed copy of the tile instead,
// and only the tile is written. (Its steps wait for each other on the host.)
void trsm(KernelContext& ctx) {
  const TensorView& bv = ctx.port(1);
  if (bv.size() == 0) return;
  cl_command_queue q = cl::task_queue(ctx);  // CLBlast takes a cl_command_queue*
  cl::require_dtype(q, bv.dtype);
  const CLBlastSide side = ctx.arg_string("side") == "right" ? CLBlastSideRight : CLBlastSideLeft;
  const CLBlastTriangle uplo = triangle(ctx.arg_string("uplo"));
  const CLBlastTranspose trans = transpose(ctx.arg_string("trans") == "trans");
  const CLBlastDiagonal diag = ctx.arg_string("diag") == "unit" ? CLBlastDiagonalUnit : CLBlastDiagonalNonUnit;
  const std::size_t m = std::size_t(bv.rows), n = std::size_t(bv.cols), es = dtype_size(bv.dtype);
  const cl::Operand a = cl::operand(ctx, 0), b = cl::operand(ctx, 1);
  const cl::ScratchBuffer packed(q, m * n * es);
  const cl::Operand x{packed.get(), 0, n};
  cl::copy_tile(q, m, n, es, b, x);
  const double alpha = ctx.arg_float("alpha");
  kutil::dispatch_float(bv.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    if constexpr (std::is_same_v<T, float>)
      cl::clblast_check(CLBlastStrsm(CLBlastLayoutRowMajor, side, uplo, trans, diag, m, n, float(alpha), a.mem,
                                     a.offset, a.ld, x.mem, 0, n, &q, nullptr),
                        "CLBlastStrsm");
    else
      cl::clblast_check(CLBlastDtrsm(CLBlastLayoutRowMajor, side, uplo, trans, diag, m, n, alpha, a.mem, a.offset,
                                     a.ld, x.mem, 0, n, &q, nullptr),
                        "CLBlastDtrsm");
  });
  cl::copy_tile(q, m, n, es, x, b);
  // `packed` is released here; OpenCL deletes it once the copy back has run
}

}  // namespace ymlopt::blas::opencl
#endif  // YMLOPT_HAVE_CLBLAST
