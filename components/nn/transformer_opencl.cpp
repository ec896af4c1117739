// OpenCL kernels of nn.gelu, nn.silu, nn.softmax, nn.layernorm, nn.rmsnorm,
// nn.swiglu, nn.rope and nn.embedding (transformer_opencl.hpp). f32, strided
// rows. Element-wise kernels and rope: a work-item per element (per pair),
// on a grid rounded up to the work-group size. Row kernels (softmax and the
// norms): a work-group per row, the row's sums and max reduced in local memory.
#include "nn/transformer_opencl.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "nn/transformer_internal.hpp"

namespace ymlopt::nn::opencl {

namespace cl = ymlopt::opencl;

namespace {

// FP_CONTRACT off: the products round like the CPU kernels' (no fused multiply-adds).
const char* const kSource = R"CLC(
#pragma OPENCL FP_CONTRACT OFF

// ---- element-wise: a (cols, rows) grid, cols rounded up to the work-group size

__kernel void gelu_tanh_rows(__global const float* x, ulong xo, ulong ldx, __global float* y, ulong yo, ulong ldy,
                             ulong cols) {
  const size_t c = get_global_id(0), r = get_global_id(1);
  if (c >= cols) return;
  const float v = x[xo + r * ldx + c];
  y[yo + r * ldy + c] = 0.5f * v * (1.0f + tanh(0.7978845608028654f * (v + 0.044715f * v * v * v)));
}

__kernel void gelu_erf_rows(__global const float* x, ulong xo, ulong ldx, __global float* y, ulong yo, ulong ldy,
                            ulong cols) {
  const size_t c = get_global_id(0), r = get_global_id(1);
  if (c >= cols) return;
  const float v = x[xo + r * ldx + c];
  y[yo + r * ldy + c] = 0.5f * v * (1.0f + erf(v * 0.7071067811865476f));
}

__kernel void silu_rows(__global const float* x, ulong xo, ulong ldx, __global float* y, ulong yo, ulong ldy,
                        ulong cols) {
  const size_t c = get_global_id(0), r = get_global_id(1);
  if (c >= cols) return;
  const float v = x[xo + r * ldx + c];
  y[yo + r * ldy + c] = v / (1.0f + exp(-v));
}

__kernel void swiglu_rows(__global const float* g, ulong go, ulong ldg, __global const float* u, ulong uo, ulong ldu,
                          __global float* y, ulong yo, ulong ldy, ulong cols) {
  const size_t c = get_global_id(0), r = get_global_id(1);
  if (c >= cols) return;
  const float a = g[go + r * ldg + c];
  y[yo + r * ldy + c] = a / (1.0f + exp(-a)) * u[uo + r * ldu + c];
}

// ---- row kernels: a work-group (a power of two in size) per row, red[] one float per work-item

float group_sum(float v, __local float* red) {
  const size_t l = get_local_id(0);
  red[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t s = get_local_size(0) / 2; s > 0; s /= 2) {
    if (l < s) red[l] += red[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);  // red is free for the next reduction
  return r;
}

float group_max(float v, __local float* red) {
  const size_t l = get_local_id(0);
  red[l] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (size_t s = get_local_size(0) / 2; s > 0; s /= 2) {
    if (l < s && red[l + s] > red[l]) red[l] = red[l + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float r = red[0];
  barrier(CLK_LOCAL_MEM_FENCE);
  return r;
}

// y may be x: each work-item reads and writes the same elements in every pass.
__kernel void softmax_rows(__global const float* x, ulong xo, ulong ldx, __global float* y, ulong yo, ulong ldy,
                           ulong cols, __local float* red) {
  const size_t l = get_local_id(0), n = get_local_size(0), r = get_group_id(1);
  __global const float* xr = x + xo + r * ldx;
  __global float* yr = y + yo + r * ldy;
  float m = -INFINITY;
  for (size_t j = l; j < cols; j += n) m = xr[j] > m ? xr[j] : m;
  m = group_max(m, red);
  float s = 0.0f;
  for (size_t j = l; j < cols; j += n) {
    const float e = exp(xr[j] - m);
    yr[j] = e;
    s += e;
  }
  const float inv = 1.0f / group_sum(s, red);
  for (size_t j = l; j < cols; j += n) yr[j] *= inv;
}

__kernel void layernorm_rows(__global const float* x, ulong xo, ulong ldx, __global const float* g, ulong go,
                             __global const float* b, ulong bo, __global float* y, ulong yo, ulong ldy, ulong cols,
                             float eps, int has_g, int has_b, __local float* red) {
  const size_t l = get_local_id(0), n = get_local_size(0), r = get_group_id(1);
  __global const float* xr = x + xo + r * ldx;
  __global float* yr = y + yo + r * ldy;
  float s = 0.0f;
  for (size_t j = l; j < cols; j += n) s += xr[j];
  const float mean = group_sum(s, red) / (float)cols;
  float sq = 0.0f;
  for (size_t j = l; j < cols; j += n) {
    const float c = xr[j] - mean;
    sq += c * c;
  }
  const float rs = 1.0f / sqrt(group_sum(sq, red) / (float)cols + eps);
  for (size_t j = l; j < cols; j += n) {
    float v = (xr[j] - mean) * rs;
    if (has_g) v = v * g[go + j];
    if (has_b) v = v + b[bo + j];
    yr[j] = v;
  }
}

__kernel void rmsnorm_rows(__global const float* x, ulong xo, ulong ldx, __global const float* w, ulong wo,
                           __global float* y, ulong yo, ulong ldy, ulong cols, float eps, int has_w,
                           __local float* red) {
  const size_t l = get_local_id(0), n = get_local_size(0), r = get_group_id(1);
  __global const float* xr = x + xo + r * ldx;
  __global float* yr = y + yo + r * ldy;
  float sq = 0.0f;
  for (size_t j = l; j < cols; j += n) sq += xr[j] * xr[j];
  const float rs = 1.0f / sqrt(group_sum(sq, red) / (float)cols + eps);
  for (size_t j = l; j < cols; j += n) yr[j] = has_w ? xr[j] * rs * w[wo + j] : xr[j] * rs;
}

// ---- rope: a work-item per (pair i, row r), for every head of the row. The
// angle p * f_i, f_i = freq[i].x + freq[i].y (the host's double split in two
// floats), is formed as hi + lo and reduced by 2 pi = two_pi_hi + two_pi_lo
// with exact fused products: about 3e-7 absolute for positions below 2^24.

__kernel void rope_rows(__global float* x, ulong xo, ulong ldx, ulong rows, uint heads, uint dh, uint half_rd,
                        ulong seq, ulong offset, int interleaved, __global const float2* freq, float two_pi_hi,
                        float two_pi_lo) {
  const size_t i = get_global_id(0), r = get_global_id(1);
  if (i >= half_rd || r >= rows) return;
  const float p = (float)(r % seq + offset);
  const float2 f = freq[i];
  const float hi = p * f.x;
  const float lo = fma(p, f.x, -hi) + p * f.y;
  const float k = rint(hi * 0.15915494309189535f);
  const float a = fma(-k, two_pi_lo, fma(-k, two_pi_hi, hi)) + lo;
  const float c = cos(a), s = sin(a);
  const size_t ia = interleaved ? 2 * i : i, ib = interleaved ? 2 * i + 1 : i + half_rd;
  for (uint h = 0; h < heads; ++h) {
    __global float* xh = x + xo + r * ldx + (size_t)h * dh;
    const float av = xh[ia], bv = xh[ib];
    xh[ia] = av * c - bv * s;
    xh[ib] = bv * c + av * s;
  }
}
)CLC";

// nn.embedding, built per element size (-DE=uint ...): rows are copied bit
// for bit. An id outside [0, vocab) leaves its row unwritten and lowers *bad
// to its position.
const char* const kEmbeddingSource = R"CLC(
__kernel void embedding_rows(__global const int* ids, ulong io, ulong icols, ulong ild, __global const E* table,
                             ulong to, ulong tld, ulong vocab, __global E* y, ulong yo, ulong yld, ulong d, ulong n,
                             volatile __global int* bad) {
  const size_t c = get_global_id(0), i = get_global_id(1);
  if (i >= n) return;
  const int v = ids[io + (i / icols) * ild + i % icols];
  if (v < 0 || (ulong)v >= vocab) {
    if (c == 0) atomic_min(bad, (int)i);
    return;
  }
  if (c < d) y[yo + i * yld + c] = table[to + (ulong)v * tld + c];
}
)CLC";

const cl::Program& program() {
  static const cl::Program p{"nn", kSource};
  return p;
}

const cl::Program& embedding_program() {
  static const cl::Program p{"nn.embedding", kEmbeddingSource};
  return p;
}

// Work-group sizes do not follow the shapes: PoCL compiles a kernel anew for
// each work-group size it runs with.

/// A work-item per element of rows x cols (work-groups of 64 along the columns).
void enqueue_elements(cl_command_queue q, const cl::Kernel& k, std::int64_t cols, std::int64_t rows) {
  const std::size_t global[2] = {std::size_t(cols), std::size_t(rows)};
  const std::size_t local[2] = {group_size(k, q, 64), 1};
  enqueue(q, k, 2, global, local);
}

/// A work-group of 128 per row; the kernel's last argument (index red_arg) is its local scratch.
void enqueue_rows(cl_command_queue q, const cl::Kernel& k, cl_uint red_arg, std::int64_t rows) {
  const std::size_t wg = group_size(k, q, 128);
  cl::check(clSetKernelArg(k.get(), red_arg, wg * sizeof(cl_float), nullptr), "clSetKernelArg(local scratch)");
  const std::size_t global[2] = {wg, std::size_t(rows)}, local[2] = {wg, 1};
  enqueue(q, k, 2, global, local);
}

/// Releases an OpenCL object at scope exit.
struct MemGuard {
  cl_mem m = nullptr;
  ~MemGuard() {
    if (m) clReleaseMemObject(m);
  }
};
struct EventGuard {
  cl_event e = nullptr;
  ~EventGuard() {
    if (e) clReleaseEvent(e);
  }
};

/// y = f(x) element-wise with kernel `name` of the program.
void unary(KernelContext& ctx, const char* name) {
  if (auto m = unary_check(TaskShape{ctx.ports(), ctx.args()}); !m.empty()) throw KernelError(m);
  const TensorView& x = ctx.port(0);
  if (x.size() == 0) return;
  const cl_command_queue q = queue_of(ctx);
  const Operand xo = operand(ctx, 0), yo = operand(ctx, 1);
  cl::Kernel k = program().kernel(q, "", name);
  k.arg(0, xo.mem).arg(1, xo.offset).arg(2, xo.ld).arg(3, yo.mem).arg(4, yo.offset).arg(5, yo.ld);
  k.arg(6, cl_ulong(x.cols));
  enqueue_elements(q, k, x.cols, x.rows);
}

}  // namespace

void validate(KernelContext& ctx, const std::vector<PortSpec>& ports, std::string (*check)(const TaskShape&),
              std::string (*opencl_check)(const TaskShape&)) {
  kutil::validate(ctx, ports, check);
  if (auto m = opencl_check(TaskShape{ctx.ports(), ctx.args()}); !m.empty()) throw KernelError(m);
}

std::string f32_ports(const TaskShape& t, std::size_t n_ports) {
  if (t.ports.size() != n_ports) return "wrong number of ports";
  for (const TensorView& v : t.ports)
    if (v.bound() && v.dtype != DType::f32)
      return std::string("the OpenCL kernel is f32 only, a port has dtype ") + dtype_name(v.dtype);
  return "";
}

std::size_t group_size(const cl::Kernel& k, cl_command_queue q, std::size_t want) {
  std::size_t max = 0;
  cl::check(clGetKernelWorkGroupInfo(k.get(), cl::queue_device(q), CL_KERNEL_WORK_GROUP_SIZE, sizeof max, &max,
                                     nullptr),
            "clGetKernelWorkGroupInfo(CL_KERNEL_WORK_GROUP_SIZE)");
  std::size_t g = 1;
  while (g * 2 <= std::min(want, max)) g *= 2;
  return g;
}

void enqueue(cl_command_queue q, const cl::Kernel& k, cl_uint dims, const std::size_t* global,
             const std::size_t* local, cl_event* ev) {
  std::size_t g[3] = {1, 1, 1};
  for (cl_uint d = 0; d < dims; ++d) {
    if (global[d] == 0) throw KernelError("an OpenCL kernel was enqueued on an empty grid");
    g[d] = (global[d] + local[d] - 1) / local[d] * local[d];
  }
  cl::check(clEnqueueNDRangeKernel(q, k.get(), dims, nullptr, g, local, 0, nullptr, ev), "clEnqueueNDRangeKernel");
}

std::string unary_check(const TaskShape& t) { return f32_ports(t, 2); }

void gelu(KernelContext& ctx) {
  unary(ctx, ctx.arg_string("approximate") == "tanh" ? "gelu_tanh_rows" : "gelu_erf_rows");
}

void silu(KernelContext& ctx) { unary(ctx, "silu_rows"); }

void softmax(KernelContext& ctx) {
  if (auto m = unary_check(TaskShape{ctx.ports(), ctx.args()}); !m.empty()) throw KernelError(m);
  const TensorView& x = ctx.port(0);
  if (x.size() == 0) return;
  const cl_command_queue q = queue_of(ctx);
  const Operand xo = operand(ctx, 0), yo = operand(ctx, 1);
  cl::Kernel k = program().kernel(q, "", "softmax_rows");
  k.arg(0, xo.mem).arg(1, xo.offset).arg(2, xo.ld).arg(3, yo.mem).arg(4, yo.offset).arg(5, yo.ld);
  k.arg(6, cl_ulong(x.cols));
  enqueue_rows(q, k, 7, x.rows);
}

}  // namespace ymlopt::nn::opencl

namespace ymlopt::transformer {

using namespace nn::opencl;

std::string layernorm_opencl_check(const TaskShape& t) { return f32_ports(t, layernorm_ports().size()); }

void layernorm_opencl(KernelContext& ctx) {
  validate(ctx, layernorm_ports(), layernorm_check, layernorm_opencl_check);
  const TensorView& x = ctx.port(0);
  if (x.size() == 0) return;
  const cl_command_queue q = queue_of(ctx);
  const Operand xo = operand(ctx, 0), go = operand(ctx, 1), bo = operand(ctx, 2), yo = operand(ctx, 3);
  cl::Kernel k = program().kernel(q, "", "layernorm_rows");
  k.arg(0, xo.mem).arg(1, xo.offset).arg(2, xo.ld).arg(3, go.mem).arg(4, go.offset).arg(5, bo.mem).arg(6, bo.offset);
  k.arg(7, yo.mem).arg(8, yo.offset).arg(9, yo.ld).arg(10, cl_ulong(x.cols));
  k.arg(11, cl_float(ctx.arg_float("eps"))).arg(12, cl_int(go.mem != nullptr)).arg(13, cl_int(bo.mem != nullptr));
  enqueue_rows(q, k, 14, x.rows);
}

std::string rmsnorm_opencl_check(const TaskShape& t) { return f32_ports(t, rmsnorm_ports().size()); }

void rmsnorm_opencl(KernelContext& ctx) {
  validate(ctx, rmsnorm_ports(), rmsnorm_check, rmsnorm_opencl_check);
  const TensorView& x = ctx.port(0);
  if (x.size() == 0) return;
  const cl_command_queue q = queue_of(ctx);
  const Operand xo = operand(ctx, 0), wo = operand(ctx, 1), yo = operand(ctx, 2);
  cl::Kernel k = program().kernel(q, "", "rmsnorm_rows");
  k.arg(0, xo.mem).arg(1, xo.offset).arg(2, xo.ld).arg(3, wo.mem).arg(4, wo.offset);
  k.arg(5, yo.mem).arg(6, yo.offset).arg(7, yo.ld).arg(8, cl_ulong(x.cols));
  k.arg(9, cl_float(ctx.arg_float("eps"))).arg(10, cl_int(wo.mem != nullptr));
  enqueue_rows(q, k, 11, x.rows);
}

std::string swiglu_opencl_check(const TaskShape& t) { return f32_ports(t, swiglu_ports().size()); }

void swiglu_opencl(KernelContext& ctx) {
  validate(ctx, swiglu_ports(), swiglu_check, swiglu_opencl_check);
  const TensorView& g = ctx.port(0);
  if (g.size() == 0) return;
  const cl_command_queue q = queue_of(ctx);
  const Operand go = operand(ctx, 0), uo = operand(ctx, 1), yo = operand(ctx, 2);
  cl::Kernel k = program().kernel(q, "", "swiglu_rows");
  k.arg(0, go.mem).arg(1, go.offset).arg(2, go.ld).arg(3, uo.mem).arg(4, uo.offset).arg(5, uo.ld);
  k.arg(6, yo.mem).arg(7, yo.offset).arg(8, yo.ld).arg(9, cl_ulong(g.cols));
  enqueue_elements(q, k, g.cols, g.rows);
}

// Positions are formed in float: exact below 2^24.
constexpr std::int64_t kRopeMaxPosition = std::int64_t(1) << 24;

std::string rope_opencl_check(const TaskShape& t) {
  if (t.ports.size() == rope_ports().size() && t.ports[1].bound())
    return "positions read from a tensor (port 'positions') run on the CPU kernel";
  if (auto m = f32_ports(t, rope_ports().size()); !m.empty()) return m;
  if (t.args.get_int("heads") < 1 || t.ports[0].rows == 0) return "";  // rope_check reports a bad heads
  const RopeDims d = rope_dims(t);
  const std::int64_t last = std::min(d.seq, t.ports[0].rows) - 1 + t.args.get_int("offset");
  if (last >= kRopeMaxPosition)
    return "the OpenCL nn.rope handles positions below 2^24 (float angles), this task reaches " + to_string(last);
  return "";
}

void rope_opencl(KernelContext& ctx) {
  validate(ctx, rope_ports(), rope_check, rope_opencl_check);
  const TensorView& x = ctx.port(0);
  const RopeDims d = rope_dims(TaskShape{ctx.ports(), ctx.args()});
  const std::int64_t half = d.rd / 2;
  if (x.rows == 0 || half == 0) return;
  const cl_command_queue q = queue_of(ctx);
  const Operand xo = operand(ctx, 0);
  // f_i = base^(-2i/rd) as on the CPU, in double, split into two floats
  const double base = ctx.arg_float("base");
  std::vector<cl_float> freq(static_cast<std::size_t>(2 * half));
  for (std::int64_t i = 0; i < half; ++i) {
    const double f = std::pow(base, -2.0 * double(i) / double(d.rd));
    freq[std::size_t(2 * i)] = float(f);
    freq[std::size_t(2 * i + 1)] = float(f - double(float(f)));
  }
  cl_int err = CL_SUCCESS;
  // released when the kernel that reads it has run
  MemGuard fb{clCreateBuffer(cl::queue_context(q), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                             freq.size() * sizeof(cl_float), freq.data(), &err)};
  cl::check(err, "clCreateBuffer(nn.rope frequencies)");
  const double two_pi = 2 * std::numbers::pi;
  const float two_pi_hi = float(two_pi), two_pi_lo = float(two_pi - double(two_pi_hi));
  cl::Kernel k = program().kernel(q, "", "rope_rows");
  k.arg(0, xo.mem).arg(1, xo.offset).arg(2, xo.ld).arg(3, cl_ulong(x.rows)).arg(4, cl_uint(d.heads));
  k.arg(5, cl_uint(d.dh)).arg(6, cl_uint(half)).arg(7, cl_ulong(d.seq)).arg(8, cl_ulong(ctx.arg_int("offset")));
  k.arg(9, cl_int(ctx.arg_string("style") == "interleaved")).arg(10, fb.m).arg(11, two_pi_hi).arg(12, two_pi_lo);
  enqueue_elements(q, k, half, x.rows);
}

std::string embedding_opencl_check(const TaskShape& t) {
  if (t.ports.size() != embedding_ports().size()) return "wrong number of ports";
  if (t.args.get_string("format") != "dense")
    return "the OpenCL nn.embedding reads dense tables only, not format=" + t.args.get_string("format");
  if (num_ids(t.ports[0]) > INT_MAX) return "the OpenCL nn.embedding handles up to 2^31-1 ids";
  return "";
}

namespace {

const char* bits_type(DType t) {
  switch (dtype_size(t)) {
    case 2: return "-DE=ushort";
    case 4: return "-DE=uint";
    case 8: return "-DE=ulong";
    default: throw KernelError(std::string("the OpenCL nn.embedding has no element type for ") + dtype_name(t));
  }
}

/// The id at position i of the ids port (a blocking read).
std::int32_t read_id(cl_command_queue q, const Operand& io, cl_ulong icols, std::int64_t i) {
  std::int32_t v = 0;
  const cl_ulong at = io.offset + cl_ulong(i) / icols * io.ld + cl_ulong(i) % icols;
  cl::check(clEnqueueReadBuffer(q, io.mem, CL_TRUE, at * sizeof v, sizeof v, &v, 0, nullptr, nullptr),
            "clEnqueueReadBuffer(nn.embedding id)");
  return v;
}

}  // namespace

void embedding_opencl(KernelContext& ctx) {
  validate(ctx, embedding_ports(), embedding_check, embedding_opencl_check);
  const TensorView &ids = ctx.port(0), &table = ctx.port(1);
  const std::int64_t n = num_ids(ids), vocab = table.rows, d = table.cols;
  if (n == 0) return;
  const cl_command_queue q = queue_of(ctx);
  const Operand io = operand(ctx, 0), to = operand(ctx, 1), yo = operand(ctx, 2);
  const cl_ulong icols = cl_ulong(std::max<std::int64_t>(ids.cols, 1));
  cl_int none = INT_MAX, err = CL_SUCCESS;
  MemGuard bad{clCreateBuffer(cl::queue_context(q), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof none, &none,
                              &err)};
  cl::check(err, "clCreateBuffer(nn.embedding error flag)");
  cl::Kernel k = embedding_program().kernel(q, bits_type(table.dtype), "embedding_rows");
  k.arg(0, io.mem).arg(1, io.offset).arg(2, icols).arg(3, io.ld).arg(4, to.mem).arg(5, to.offset).arg(6, to.ld);
  k.arg(7, cl_ulong(vocab)).arg(8, yo.mem).arg(9, yo.offset).arg(10, yo.ld).arg(11, cl_ulong(d));
  k.arg(12, cl_ulong(n)).arg(13, bad.m);
  const std::size_t global[2] = {std::size_t(std::max<std::int64_t>(d, 1)), std::size_t(n)};
  const std::size_t local[2] = {group_size(k, q, 64), 1};
  EventGuard done;
  enqueue(q, k, 2, global, local, &done.e);
  // the one wait: whether an id was out of range, as the CPU kernel reports it
  cl_int first = none;
  cl::check(clEnqueueReadBuffer(q, bad.m, CL_TRUE, 0, sizeof first, &first, 1, &done.e, nullptr),
            "clEnqueueReadBuffer(nn.embedding error flag)");
  if (first == none) return;
  const std::int64_t v = read_id(q, io, icols, first);
  throw KernelError("id " + to_string(v) + " at position " + to_string(first) + " is out of range: table has " +
                    to_string(vocab) + " rows (ids must be in [0, " + to_string(vocab) + "))");
}

}  // namespace ymlopt::transformer
