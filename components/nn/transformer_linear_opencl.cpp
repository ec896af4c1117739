// nn.linear on OpenCL: y = x W by CLBlast's SGEMM, then one epilogue kernel
// y = [r +] act(z + b) with the CPU kernel's activation formulas
// (transformer_linear.cpp; exp is its vexp, FP_CONTRACT off so that each
// operation rounds as on the CPU; gelu's erf is OpenCL's, within 16 ulp).
#if YMLOPT_HAVE_CLBLAST
#include "nn/transformer_linear_opencl.hpp"

#include "nn/transformer_internal.hpp"
#include "opencl/clblast.hpp"

namespace ymlopt::transformer {
namespace {

namespace cl = ymlopt::opencl;

// Offsets and leading dimensions in elements. z may be y (the GEMM wrote y) and
// r may be y (in-place residual): each work-item reads its element before writing it.
const char* const kSource = R"CLC(
#pragma OPENCL FP_CONTRACT OFF

// vexp of transformer_internal.hpp: Cephes expf, x < -87 gives 0, x > 88 exp(88), NaN stays NaN
float vexp(float x) {
  const uint xb = as_uint(x);
  int i = as_int(xb > 0xC2AE0000u ? 0xC2AE0000u : xb);
  i = i > 0x42B00000 ? 0x42B00000 : i;
  const float xc = as_float(i);
  const float t = xc * 1.44269504088896341f + 12582912.0f;
  const float n = t - 12582912.0f;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float e = p * r * r + r + 1.0f;
  const uint k = as_uint(t) - 0x4B400000u;
  const uint res = as_uint(e * as_float((k + 127u) << 23));
  const uint nan = 0u - (uint)((xb & 0x7FFFFFFFu) > 0x7F800000u);
  const uint zero = 0u - (uint)(xb > 0xC2AE0000u);
  return as_float((xb & nan) | (res & ~nan & ~zero));
}

// act: 0 none, 1 relu, 2 gelu (erf), 3 gelu_tanh, 4 silu (the Act enum's order)
float activate(float v, int act) {
  switch (act) {
    case 1: return v > 0.0f ? v : 0.0f;
    case 2: return 0.5f * v * (1.0f + erf(v * 0.7071067811865476f));
    case 3: return v / (1.0f + vexp(-1.5957691216057308f * (v + 0.044715f * v * v * v)));
    case 4: return v / (1.0f + vexp(-v));
    default: return v;
  }
}

__kernel void linear_epilogue(__global float* y, ulong yo, ulong ldy, __global const float* z, ulong zo, ulong ldz,
                              __global const float* b, ulong bo, int has_b, __global const float* r, ulong ro,
                              ulong ldr, int has_r, int act) {
  const size_t c = get_global_id(0), row = get_global_id(1);
  float v = z[zo + row * ldz + c];
  if (has_b) v = v + b[bo + c];
  v = activate(v, act);
  if (has_r) v = r[ro + row * ldr + c] + v;
  y[yo + row * ldy + c] = v;
}
)CLC";

const cl::Program& program() {
  static const cl::Program p{"nn.linear", kSource};
  return p;
}

/// The activation's number in the kernel source.
int act_code(const std::string& a) {
  if (a == "relu") return 1;
  if (a == "gelu") return 2;
  if (a == "gelu_tanh") return 3;
  if (a == "silu") return 4;
  return 0;
}

/// y = x op(W) + beta y on (c, its offset and ld).
void sgemm(cl_command_queue q, const cl::Operand& x, const cl::Operand& w, bool tw, const cl::Operand& c,
           std::size_t m, std::size_t n, std::size_t k, float beta) {
  cl::clblast_check(CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, tw ? CLBlastTransposeYes : CLBlastTransposeNo,
                                 m, n, k, 1.0f, x.mem, x.offset, x.ld, w.mem, w.offset, w.ld, beta, c.mem, c.offset,
                                 c.ld, &q, nullptr),
                    "CLBlastSgemm");
}

/// y = [r +] act(z + [b]) over m x n; unbound b or r: nullptr mem.
void epilogue(cl_command_queue q, const cl::Operand& y, const cl::Operand& z, const cl::Operand& b,
              const cl::Operand& r, int act, std::size_t m, std::size_t n) {
  cl::Kernel k = program().kernel(q, "", "linear_epilogue");
  k.arg(0, y.mem).arg(1, cl_ulong(y.offset)).arg(2, cl_ulong(y.ld));
  k.arg(3, z.mem).arg(4, cl_ulong(z.offset)).arg(5, cl_ulong(z.ld));
  k.arg(6, b.mem).arg(7, cl_ulong(b.offset)).arg(8, cl_int(b.mem != nullptr));
  k.arg(9, r.mem).arg(10, cl_ulong(r.offset)).arg(11, cl_ulong(r.ld)).arg(12, cl_int(r.mem != nullptr));
  k.arg(13, cl_int(act));
  k.enqueue_2d(q, std::int64_t(n), std::int64_t(m));
}

}  // namespace

std::string linear_opencl_check(const TaskShape& t) {
  const auto& p = t.ports;
  if (p.size() != linear_ports().size()) return "wrong number of ports";
  if (linear_format(t.args) != nn::WeightFormat::dense)
    return "the OpenCL nn.linear takes dense weights only: format=" + t.args.get_string("format") + " runs on a CPU";
  if (p[nn::kX].dtype != DType::f32)
    return std::string("the OpenCL nn.linear is f32 only, x is ") + dtype_name(p[nn::kX].dtype);
  if (p[nn::kX].cols == 0 && p[nn::kY].size() > 0) return "k = 0 (x has no columns): runs on a CPU (CLBlast needs k > 0)";
  return "";
}

void linear_opencl(KernelContext& ctx) {
  kutil::validate(ctx, linear_ports(), linear_check);
  if (auto m = linear_opencl_check(TaskShape{ctx.ports(), ctx.args()}); !m.empty()) throw KernelError(m);
  const TensorView &xv = ctx.port(nn::kX), &yv = ctx.port(nn::kY);
  const std::size_t m = std::size_t(yv.rows), n = std::size_t(yv.cols), k = std::size_t(xv.cols);
  if (m == 0 || n == 0) return;
  const cl_command_queue q = cl::task_queue(ctx);
  const bool tw = ctx.arg_bool("transpose_w");
  const int act = act_code(ctx.arg_string("activation"));
  const cl::Operand x = cl::operand(ctx, nn::kX), w = cl::operand(ctx, nn::kW), y = cl::operand(ctx, nn::kY);
  const cl::Operand b = ctx.port(nn::kB).bound() ? cl::operand(ctx, nn::kB) : cl::Operand{};
  const cl::Operand r = ctx.port(nn::kR).bound() ? cl::operand(ctx, nn::kR) : cl::Operand{};
  const bool in_place = r.mem && r.mem == y.mem && r.offset == y.offset;  // y holds the residual
  if (r.mem && !in_place && cl::overlap(r, y, m, n)) throw KernelError("port 'r' overlaps port 'y' without being y itself");
  if (!in_place) {
    // y = x W, then y = [r +] act(y + [b])
    sgemm(q, x, w, tw, y, m, n, k, 0.0f);
    if (b.mem || r.mem || act != 0) epilogue(q, y, y, b, r, act, m, n);
  } else if (act == 0) {
    // y += x W, then y += b (the CPU kernel's order)
    sgemm(q, x, w, tw, y, m, n, k, 1.0f);
    if (b.mem) epilogue(q, y, y, b, cl::Operand{}, 0, m, n);
  } else {
    // z = x W in a scratch buffer, then y += act(z + [b]); OpenCL frees z once the epilogue has run
    const cl::ScratchBuffer zb(q, m * n * sizeof(float));
    const cl::Operand z{zb.get(), 0, n};
    sgemm(q, x, w, tw, z, m, n, k, 0.0f);
    epilogue(q, y, z, b, y, act, m, n);
  }
}

}  // namespace ymlopt::transformer
#endif  // YMLOPT_HAVE_CLBLAST
