// The CUDA kernels of the transformer building blocks, host side: validate, then
// launch the device code of nn_cuda.cu, transformer_cuda.cu and quant_cuda.cu
// (transformer_internal.hpp). Built only with CUDA.
#include "nn/transformer_internal.hpp"

#if YMLOPT_HAVE_CUDA
#include "nn/linear_formats.hpp"
#include "nn/nn.hpp"
#include "nn/nn_cuda.hpp"
#include "nn/transformer_cuda.hpp"
#include "quant/quant_cuda.hpp"

namespace ymlopt::transformer {

// ============================================================ CUDA kernels
// Port data are device pointers; kernels launch on ctx.cuda_stream(). Each
// *_cuda_check says which tasks the CUDA kernel handles (f32, and per op the
// layout it needs); the engine runs the others on a CPU.

namespace {

std::string f32_only(const TaskShape& t, std::size_t n_ports) {
  if (t.ports.size() != n_ports) return "wrong number of ports";
  for (const TensorView& v : t.ports)
    if (v.bound() && v.dtype != DType::f32)
      return std::string("CUDA kernel is f32 only, a port has dtype ") + dtype_name(v.dtype);
  return "";
}

/// Validates like the CPU kernel (check), then the CUDA kernel's own cuda_check.
void cuda_validate(KernelContext& ctx, const std::vector<PortSpec>& ports, std::string (*check)(const TaskShape&),
                   std::string (*cuda_check)(const TaskShape&)) {
  kutil::validate(ctx, ports, check);
  if (auto m = cuda_check(TaskShape{ctx.ports(), ctx.args()}); !m.empty()) throw KernelError(m);
}

template <class T> T* dptr(const TensorView& v) { return v.bound() ? static_cast<T*>(v.data) : nullptr; }

}  // namespace

std::string layernorm_cuda_check(const TaskShape& t) {
  if (auto m = f32_only(t, layernorm_ports().size()); !m.empty()) return m;
  if (!t.ports[0].contiguous() || !t.ports[3].contiguous()) return "CUDA kernel needs contiguous rows (ld == cols)";
  return "";
}

void layernorm_cuda(KernelContext& ctx) {
  cuda_validate(ctx, layernorm_ports(), layernorm_check, layernorm_cuda_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(3);
  if (x.cols == 0) return;
  nn::cuda::layernorm_rows(dptr<const float>(x), dptr<const float>(ctx.port(1)), dptr<const float>(ctx.port(2)),
                           dptr<float>(y), x.rows, x.cols, float(ctx.arg_float("eps")), ctx.cuda_stream());
}

std::string rmsnorm_cuda_check(const TaskShape& t) {
  if (auto m = f32_only(t, rmsnorm_ports().size()); !m.empty()) return m;
  if (!t.ports[0].contiguous() || !t.ports[2].contiguous()) return "CUDA kernel needs contiguous rows (ld == cols)";
  return "";
}

void rmsnorm_cuda(KernelContext& ctx) {
  cuda_validate(ctx, rmsnorm_ports(), rmsnorm_check, rmsnorm_cuda_check);
  const TensorView &x = ctx.port(0), &y = ctx.port(2);
  if (x.cols == 0) return;
  nn::cuda::rmsnorm_rows(dptr<const float>(x), dptr<const float>(ctx.port(1)), dptr<float>(y), x.rows, x.cols,
                         float(ctx.arg_float("eps")), ctx.cuda_stream());
}

namespace {

nn::cuda::AttentionShape attention_cuda_shape(const TaskShape& t) {
  const AttnDims d = attn_dims(t);
  nn::cuda::AttentionShape s;
  s.batch = d.batch;
  s.seq = d.seq;
  s.heads = d.heads;
  s.kv_heads = d.kv;
  s.head_dim = d.dh;
  s.head_begin = d.hb;
  s.head_end = d.he;
  s.ldq = ld_of(t.ports[0]);
  s.ldk = ld_of(t.ports[1]);
  s.ldv = ld_of(t.ports[2]);
  s.window = t.args.get_int("window");
  s.ldy = ld_of(t.ports[3]);
  return s;
}

}  // namespace

std::string attention_cuda_check(const TaskShape& t) {
  if (auto m = f32_only(t, attention_ports().size()); !m.empty()) return m;
  if (t.args.get_int("heads") < 1 || t.ports[0].rows == 0) return "";
  return nn::cuda::attention_shape_error(attention_cuda_shape(t));
}

void attention_cuda(KernelContext& ctx) {
  cuda_validate(ctx, attention_ports(), attention_check, attention_cuda_check);
  const TaskShape t{ctx.ports(), ctx.args()};
  const AttnDims d = attn_dims(t);
  if (d.t == 0) return;
  const double sp = ctx.arg_float("scale");
  const double scale = sp > 0 ? sp : 1.0 / std::sqrt(double(d.dh));
  nn::cuda::attention_f32(dptr<const float>(ctx.port(0)), dptr<const float>(ctx.port(1)),
                          dptr<const float>(ctx.port(2)), dptr<float>(ctx.port(3)), attention_cuda_shape(t),
                          ctx.arg_bool("causal"), float(scale), ctx.cuda_stream());
}

std::string embedding_cuda_check(const TaskShape& t) {
  if (t.ports.size() != embedding_ports().size()) return "wrong number of ports";
  if (t.args.get_string("format") != "dense") return "CUDA kernel handles format=dense only";
  if (t.ports[1].dtype != DType::f32) return std::string("CUDA kernel is f32 only, table is ") + dtype_name(t.ports[1].dtype);
  return "";
}

void embedding_cuda(KernelContext& ctx) {
  cuda_validate(ctx, embedding_ports(), embedding_check, embedding_cuda_check);
  const TensorView &ids = ctx.port(0), &table = ctx.port(1), &y = ctx.port(2);
  const int64_t n = num_ids(ids);
  if (n == 0) return;
  const int64_t icols = std::max<int64_t>(ids.cols, 1);
  std::int64_t bad_id = 0;
  const std::int64_t pos = nn::cuda::embedding_f32(
      dptr<const std::int32_t>(ids), n, icols, std::max<int64_t>(ids.ld, icols), dptr<const float>(table),
      table.rows, table.cols, ld_of(table), dptr<float>(y), ld_of(y), &bad_id, ctx.cuda_stream());
  if (pos >= 0)
    throw KernelError("id " + to_string(bad_id) + " at position " + to_string(pos) + " is out of range: table has " +
                      to_string(table.rows) + " rows (ids must be in [0, " + to_string(table.rows) + "))");
}

std::string rope_cuda_check(const TaskShape& t) {
  if (t.ports.size() == rope_ports().size() && t.ports[1].bound())
    return "positions read from a tensor (port 'positions') run on the CPU kernel";
  return f32_only(t, rope_ports().size());
}

void rope_cuda(KernelContext& ctx) {
  cuda_validate(ctx, rope_ports(), rope_check, rope_cuda_check);
  const TensorView& x = ctx.port(0);
  const RopeDims d = rope_dims(TaskShape{ctx.ports(), ctx.args()});
  if (x.rows == 0 || d.rd == 0) return;
  nn::cuda::rope_f32(dptr<float>(x), x.rows, ld_of(x), d.heads, d.dh, d.rd, d.seq, ctx.arg_int("offset"),
                     ctx.arg_float("base"), ctx.arg_string("style") == "interleaved", ctx.cuda_stream());
}

/// The CUDA kernel computes y = x W for dense f32 W (cuBLAS) and for a
/// symmetric per-channel int8 W (cuBLASLt int8 GEMM with per-token activation
/// quantization, the arithmetic of quant::linear); bias, residual, activation
/// and the other formats run on a CPU.
std::string linear_cuda_check(const TaskShape& t) {
  const auto& p = t.ports;
  if (p.size() != linear_ports().size()) return "wrong number of ports";
  if (p[nn::kX].dtype != DType::f32 || p[nn::kY].dtype != DType::f32)
    return std::string("CUDA kernel is f32 only, x is ") + dtype_name(p[nn::kX].dtype);
  if (p[nn::kB].bound() || p[nn::kR].bound() || t.args.get_string("activation") != "none")
    return "CUDA kernel computes y = x W only (no bias, residual or activation)";
  const nn::WeightFormat f = linear_format(t.args);
  if (f == nn::WeightFormat::dense)
    return p[nn::kW].dtype == DType::f32 ? "" : std::string("CUDA kernel needs an f32 w, got ") + dtype_name(p[nn::kW].dtype);
  if (f != nn::WeightFormat::int8) return "CUDA kernel handles format dense and int8 only";
  if (t.args.get_string("activations") != "int8") return "CUDA int8 kernel quantizes the activations (activations=int8 only)";
  const TensorView& sc = p[nn::kWScale];
  if (t.args.get_int("group") != 0 || p[nn::kWZero].bound() || sc.dtype != DType::f32 ||
      !(sc.rows <= 1 || (sc.cols == 1 && sc.ld == 1)))
    return "CUDA int8 kernel: symmetric per-channel weights only (group=0, no w_zero, contiguous f32 w_scale)";
  const LinearDims d = linear_dims(t);
  const TensorView& w = p[nn::kW];
  // the scratch codes and int32 products are packed: ld k and n
  return quant::cuda::gemm_i8_shape_error(nullptr, d.k, nullptr, w.rows > 1 ? w.ld : w.cols, nullptr, d.n, d.m, d.n,
                                          d.k);
}

void linear_cuda(KernelContext& ctx) {
  cuda_validate(ctx, linear_ports(), linear_check, linear_cuda_check);
  const TensorView &x = ctx.port(nn::kX), &w = ctx.port(nn::kW), &y = ctx.port(nn::kY);
  const int64_t m = y.rows, n = y.cols, k = x.cols;
  if (m == 0 || n == 0) return;
  if (linear_format(ctx.args()) == nn::WeightFormat::dense) {
    nn::cuda::gemm_f32_op(false, ctx.arg_bool("transpose_w"), dptr<const float>(x), ld_of(x), dptr<const float>(w),
                          ld_of(w), dptr<float>(y), ld_of(y), m, n, k, 1.f, 0.f, ctx.cuda_stream());
    return;
  }
  quant::cuda::linear_i8(dptr<const float>(x), m, k, ld_of(x), dptr<const std::int8_t>(w), w.rows > 1 ? w.ld : w.cols,
                         dptr<const float>(ctx.port(nn::kWScale)), n, dptr<float>(y), ld_of(y), ctx.cuda_stream());
}

}  // namespace ymlopt::transformer

#endif  // YMLOPT_HAVE_CUDA
