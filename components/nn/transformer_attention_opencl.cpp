// The OpenCL nn.attention (transformer_opencl.hpp): flash-attention style, one
// work-group per (block of BQ queries, head, sequence). The block's queries
// stay in local memory; the keys of its sequence pass through in tiles of BK
// rows (K, then V, in one local tile), and each query row keeps a running max
// m, sum l and its output accumulator (in the work-items' registers) that
// every tile rescales by exp(m_old - m_new). Memory: the tiles, never a
// seq x seq score matrix. Causal blocks stop at their last query.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "nn/transformer_internal.hpp"
#include "nn/transformer_opencl.hpp"

namespace ymlopt::transformer {
namespace {

namespace cl = ymlopt::opencl;
using namespace nn::opencl;

// Built per tile shape: -DDHP (head dim rounded up to 8), -DBQ, -DBK, -DWG
// (work-items per group). Offsets and leading dimensions in floats.
const char* const kSource = R"CLC(
#pragma OPENCL FP_CONTRACT OFF
#define KS (DHP + 1)  // K/V tile row stride (+1 against local memory bank conflicts)
#define SS (BK + 1)   // score tile row stride
#define NACC ((BQ * DHP + WG - 1) / WG)

// Rows j0.. of one head of K or V into t[BK][KS]; zeros past the sequence and past dh.
void load_tile(__local float* t, __global const float* src, ulong ld, ulong j0, ulong seq, uint dh) {
  for (uint e = get_local_id(0); e < BK * DHP; e += WG) {
    const uint j = e / DHP, c = e % DHP;
    t[j * KS + c] = (j0 + j < seq && c < dh) ? src[(j0 + j) * ld + c] : 0.0f;
  }
}

__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void attention_rows(
    __global const float* q, ulong qo, ulong ldq, __global const float* k, ulong ko, ulong ldk,
    __global const float* v, ulong vo, ulong ldv, __global float* y, ulong yo, ulong ldy, ulong seq, uint dh,
    uint group, uint head_begin, float scale, int causal, ulong window) {
  __local float qs[BQ * DHP];  // the block's queries, times scale
  __local float kv[BK * KS];   // a K tile, then the V tile of the same keys
  __local float ss[BQ * SS];   // scores, then probabilities
  __local float row_m[BQ];     // running max
  __local float row_l[BQ];     // running sum
  __local float row_c[BQ];     // this tile's rescale of the sum and the output
  const uint t = get_local_id(0);
  const ulong i0 = get_group_id(0) * BQ, b = get_group_id(2);
  const uint h = head_begin + get_group_id(1), g = h / group;
  __global const float* Q = q + qo + b * seq * ldq + h * dh;
  __global const float* K = k + ko + b * seq * ldk + g * dh;
  __global const float* V = v + vo + b * seq * ldv + g * dh;
  __global float* Y = y + yo + b * seq * ldy + h * dh;
  for (uint e = t; e < BQ * DHP; e += WG) {
    const uint r = e / DHP, c = e % DHP;
    qs[e] = (i0 + r < seq && c < dh) ? Q[(i0 + r) * ldq + c] * scale : 0.0f;
  }
  if (t < BQ) {
    row_m[t] = -INFINITY;
    row_l[t] = 0.0f;
  }
  float acc[NACC];  // element t + a*WG of the block's [BQ][DHP] output
  for (uint a = 0; a < NACC; ++a) acc[a] = 0.0f;
  const ulong kend = causal ? min(i0 + BQ, seq) : seq;
  // a window: query i sees keys i - window < j <= i; tiles before the block's first are skipped
  const ulong kbegin = window > 0 && i0 + 1 > window ? (i0 + 1 - window) / BK * BK : 0;
  for (ulong j0 = kbegin; j0 < kend; j0 += BK) {
    load_tile(kv, K, ldk, j0, seq, dh);
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint e = t; e < BQ * BK; e += WG) {
      const uint r = e / BK, j = e % BK;
      const ulong qi = i0 + r, key = j0 + j;
      float s = -INFINITY;
      if (qi < seq && key < seq && (!causal || key <= qi) && (window == 0 || key + window > qi)) {
        s = 0.0f;
        for (uint c = 0; c < DHP; ++c) s += qs[r * DHP + c] * kv[j * KS + c];
      }
      ss[r * SS + j] = s;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    // the scores are in ss: K is no longer read. (PoCL 3.1 miscompiled this
    // region with the load after the softmax's if: keep it first.)
    load_tile(kv, V, ldv, j0, seq, dh);
    if (t < BQ) {  // online softmax of row t over this tile
      const float m_old = row_m[t];
      float m = m_old;
      for (uint j = 0; j < BK; ++j) m = fmax(m, ss[t * SS + j]);
      float corr = 1.0f, sum = 0.0f;
      for (uint j = 0; j < BK; ++j) {
        const float p = m == -INFINITY ? 0.0f : exp(ss[t * SS + j] - m);  // masked: exp(-inf) = 0
        ss[t * SS + j] = p;
        sum += p;
      }
      if (m != -INFINITY) corr = exp(m_old - m);  // 0 on the first tile
      row_m[t] = m;
      row_l[t] = row_l[t] * corr + sum;
      row_c[t] = corr;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    for (uint a = 0; a < NACC; ++a) {
      const uint e = t + a * WG;
      if (e < BQ * DHP) {
        const uint r = e / DHP, c = e % DHP;
        float o = acc[a] * row_c[r];
        for (uint j = 0; j < BK; ++j) o += ss[r * SS + j] * kv[j * KS + c];
        acc[a] = o;
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // kv and ss are overwritten next
  }
  for (uint a = 0; a < NACC; ++a) {
    const uint e = t + a * WG, r = e / DHP, c = e % DHP;
    if (e < BQ * DHP && i0 + r < seq && c < dh) Y[(i0 + r) * ldy + c] = acc[a] / row_l[r];
  }
}
)CLC";

const cl::Program& program() {
  static const cl::Program p{"nn.attention", kSource};
  return p;
}

/// Tile shape for a head dim: the local memory stays under 27 KiB (OpenCL
/// guarantees 32 KiB).
struct AttnTiles {
  std::int64_t dhp, bq, bk;
  std::size_t local_bytes() const {
    return sizeof(float) * std::size_t(bq * dhp + bk * (dhp + 1) + bq * (bk + 1) + 3 * bq);
  }
};

AttnTiles attn_tiles(std::int64_t dh) {
  const std::int64_t dhp = (dh + 7) / 8 * 8;
  if (dhp <= 64) return {dhp, 32, 32};
  if (dhp <= 128) return {dhp, 16, 32};
  return {dhp, 8, 16};
}

/// The kernel for `tiles` with the largest work-group (128, 64 or 32) the device runs it with.
cl::Kernel attention_kernel(cl_command_queue q, const AttnTiles& tiles, std::size_t& wg) {
  for (wg = 128;; wg /= 2) {
    const std::string options = "-DDHP=" + to_string(tiles.dhp) + " -DBQ=" + to_string(tiles.bq) +
                                " -DBK=" + to_string(tiles.bk) + " -DWG=" + to_string(wg);
    cl::Kernel k = program().kernel(q, options, "attention_rows");
    if (group_size(k, q, wg) == wg) return k;
    if (wg == 32)
      throw KernelError("the OpenCL nn.attention needs work-groups of 32 work-items, the device runs " +
                        to_string(group_size(k, q, wg)));
  }
}

}  // namespace

std::string attention_opencl_check(const TaskShape& t) {
  if (auto m = f32_ports(t, attention_ports().size()); !m.empty()) return m;
  const std::int64_t heads = t.args.get_int("heads");
  if (heads < 1 || t.ports[0].rows == 0 || t.ports[0].cols % heads != 0) return "";  // attention_check reports these
  const AttnDims d = attn_dims(t);
  if (d.dh > kOpenclAttentionMaxHeadDim)
    return "the OpenCL nn.attention handles head dims up to " + to_string(kOpenclAttentionMaxHeadDim) +
           ", this task's is " + to_string(d.dh);
  return "";
}

void attention_opencl(KernelContext& ctx) {
  validate(ctx, attention_ports(), attention_check, attention_opencl_check);
  const AttnDims d = attn_dims(TaskShape{ctx.ports(), ctx.args()});
  if (d.t == 0) return;
  const cl_command_queue q = queue_of(ctx);
  const AttnTiles tiles = attn_tiles(d.dh);
  cl_ulong local_mem = 0;
  cl::check(clGetDeviceInfo(cl::queue_device(q), CL_DEVICE_LOCAL_MEM_SIZE, sizeof local_mem, &local_mem, nullptr),
            "clGetDeviceInfo(CL_DEVICE_LOCAL_MEM_SIZE)");
  if (local_mem < tiles.local_bytes())
    throw KernelError("the OpenCL nn.attention needs " + to_string(tiles.local_bytes()) +
                      " bytes of local memory at head dim " + to_string(d.dh) + ", the device has " +
                      to_string(local_mem));
  const Operand qo = operand(ctx, 0), ko = operand(ctx, 1), vo = operand(ctx, 2), yo = operand(ctx, 3);
  const double sp = ctx.arg_float("scale");
  const float scale = float(sp > 0 ? sp : 1.0 / std::sqrt(double(d.dh)));
  std::size_t wg = 0;
  cl::Kernel k = attention_kernel(q, tiles, wg);
  k.arg(0, qo.mem).arg(1, qo.offset).arg(2, qo.ld).arg(3, ko.mem).arg(4, ko.offset).arg(5, ko.ld);
  k.arg(6, vo.mem).arg(7, vo.offset).arg(8, vo.ld).arg(9, yo.mem).arg(10, yo.offset).arg(11, yo.ld);
  k.arg(12, cl_ulong(d.seq)).arg(13, cl_uint(d.dh)).arg(14, cl_uint(d.heads / d.kv)).arg(15, cl_uint(d.hb));
  k.arg(16, cl_float(scale)).arg(17, cl_int(ctx.arg_bool("causal")))
      .arg(18, cl_ulong(ctx.arg_int("window")));
  const std::int64_t blocks = (d.seq + tiles.bq - 1) / tiles.bq;
  const std::size_t global[3] = {std::size_t(blocks) * wg, std::size_t(d.he - d.hb), std::size_t(d.batch)};
  const std::size_t local[3] = {wg, 1, 1};
  enqueue(q, k, 3, global, local);
}

}  // namespace ymlopt::transformer
