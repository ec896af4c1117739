// CUDA kernels of nn.attention, nn.embedding and nn.rope: see transformer_cuda.hpp.
#include "nn/transformer_cuda.hpp"

#include <cuda_runtime.h>

#include <climits>
#include <cmath>
#include <stdexcept>

namespace ymlopt::nn::cuda {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e) + " (error " + std::to_string(int(e)) + ")");
}

cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

// ------------------------------------------------------------------ attention
// One block of kWarps warps per (query tile of kBq rows, head, sequence). Each
// block walks the keys of its sequence in tiles of kBk = 32 rows (K and V
// tiles in shared memory); each warp owns kBq / kWarps query rows. For one
// query row and one key tile, lane j computes the score of key j, the warp
// reduces the tile max and sum with shuffles, and lane l accumulates output
// dims l, l+32, l+64, l+96 in registers (online softmax: running max m, sum l,
// accumulator rescaled by exp(m_old - m_new)). Memory: O(tile), not O(seq^2).
constexpr int kBk = 32;  // keys per tile: one per lane
constexpr int kBq = 16;  // queries per block
constexpr int kWarps = 4;
constexpr int kDmax = int(kAttentionMaxHeadDim);
constexpr int kPerLane = kDmax / 32;

__device__ float warp_max(float v) {
  for (int off = 16; off > 0; off /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
  return v;
}
__device__ float warp_sum(float v) {
  for (int off = 16; off > 0; off /= 2) v += __shfl_xor_sync(0xffffffffu, v, off);
  return v;
}

struct AttnArgs {
  const float* q;
  const float* k;
  const float* v;
  float* y;
  long long seq, dh, group, head_begin, ldq, ldk, ldv, ldy;
  float scale;
  bool causal;
  long long window;  // > 0: query i attends keys i - window < j <= i
};

__global__ void __launch_bounds__(kWarps * 32) attention_kernel(AttnArgs a) {
  __shared__ float qs[kBq][kDmax];
  __shared__ float ks[kBk][kDmax + 1];  // +1: lane j reads row j, no bank conflicts
  __shared__ float vs[kBk][kDmax];
  const long long S = a.seq, dh = a.dh;
  const long long i0 = (long long)blockIdx.x * kBq;
  const long long h = a.head_begin + blockIdx.y, g = h / a.group, b = blockIdx.z;
  const float* Q = a.q + b * S * a.ldq + h * dh;
  const float* K = a.k + b * S * a.ldk + g * dh;
  const float* V = a.v + b * S * a.ldv + g * dh;
  float* Y = a.y + b * S * a.ldy + h * dh;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  constexpr int kRowsPerWarp = kBq / kWarps;

  for (int e = tid; e < kBq * kDmax; e += blockDim.x) {
    const int r = e / kDmax, c = e % kDmax;
    qs[r][c] = (i0 + r < S && c < dh) ? Q[(i0 + r) * a.ldq + c] : 0.f;
  }
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][kPerLane];
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
    for (int t = 0; t < kPerLane; ++t) acc[r][t] = 0.f;
  }
  // causal: keys after the block's last query are never needed
  const long long q_last = i0 + kBq - 1 < S - 1 ? i0 + kBq - 1 : S - 1;
  const long long kend = a.causal ? q_last + 1 : S;
  // a window: tiles before the block's first query's window are never needed
  const long long kbegin = a.window > 0 && i0 + 1 > a.window ? (i0 + 1 - a.window) / kBk * kBk : 0;
  for (long long j0 = kbegin; j0 < kend; j0 += kBk) {
    __syncthreads();  // the previous tile is no longer read (and qs is written, first time)
    for (int e = tid; e < kBk * kDmax; e += blockDim.x) {
      const int r = e / kDmax, c = e % kDmax;
      const bool in = j0 + r < S && c < dh;
      ks[r][c] = in ? K[(j0 + r) * a.ldk + c] : 0.f;
      vs[r][c] = in ? V[(j0 + r) * a.ldv + c] : 0.f;
    }
    __syncthreads();
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int qr = warp * kRowsPerWarp + r;
      const long long qi = i0 + qr;
      if (qi >= S) continue;  // warp-uniform
      const long long key = j0 + lane;
      const bool valid = key < S && (!a.causal || key <= qi) && (a.window == 0 || key + a.window > qi);
      float s = -INFINITY;
      if (valid) {
        float dot = 0.f;
        for (long long c = 0; c < dh; ++c) dot += qs[qr][c] * ks[lane][c];
        s = dot * a.scale;
      }
      const float m_new = fmaxf(m[r], warp_max(s));
      if (m_new == -INFINITY) continue;  // no valid key yet for this row (warp-uniform)
      const float p = valid ? expf(s - m_new) : 0.f;
      const float corr = expf(m[r] - m_new);  // exp(-inf) = 0 the first time
      l[r] = l[r] * corr + warp_sum(p);
      m[r] = m_new;
      for (int t = 0; t < kPerLane; ++t) acc[r][t] *= corr;
      for (int j = 0; j < kBk; ++j) {
        const float pj = __shfl_sync(0xffffffffu, p, j);
        for (int t = 0; t < kPerLane; ++t) acc[r][t] += pj * vs[j][lane + 32 * t];
      }
    }
  }
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const long long qi = i0 + warp * kRowsPerWarp + r;
    if (qi >= S) continue;
    const float inv = 1.f / l[r];  // l >= 1: the row max contributes exp(0)
    for (int t = 0; t < kPerLane; ++t) {
      const long long c = lane + 32 * t;
      if (c < dh) Y[qi * a.ldy + c] = acc[r][t] * inv;
    }
  }
}

// ------------------------------------------------------------------ embedding

__global__ void embedding_kernel(const std::int32_t* ids, long long ids_cols, long long ids_ld, const float* table,
                                 long long vocab, long long d, long long table_ld, float* y, long long y_ld,
                                 unsigned long long* first_bad) {
  const long long i = blockIdx.x;
  const long long v = ids[(i / ids_cols) * ids_ld + i % ids_cols];
  if (v < 0 || v >= vocab) {
    if (threadIdx.x == 0) atomicMin(first_bad, (unsigned long long)i);
    return;
  }
  const float* src = table + v * table_ld;
  float* dst = y + i * y_ld;
  for (long long c = threadIdx.x; c < d; c += blockDim.x) dst[c] = src[c];
}

// ------------------------------------------------------------------ rope

__global__ void rope_kernel(float* x, long long rows, long long ldx, long long heads, long long dh, long long half,
                            long long rd, long long seq, long long offset, double base, bool interleaved) {
  const long long total = rows * heads * half;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < total;
       e += (long long)gridDim.x * blockDim.x) {
    const long long i = e % half, h = (e / half) % heads, r = e / (half * heads);
    const double ang = double(r % seq + offset) * pow(base, -2.0 * double(i) / double(rd));
    const float c = float(cos(ang)), s = float(sin(ang));
    float* xh = x + r * ldx + h * dh;
    float* pa = interleaved ? xh + 2 * i : xh + i;
    float* pb = interleaved ? xh + 2 * i + 1 : xh + half + i;
    const float av = *pa, bv = *pb;
    *pa = av * c - bv * s;
    *pb = bv * c + av * s;
  }
}

std::string i2s(std::int64_t v) { return std::to_string(v); }

}  // namespace

std::string attention_shape_error(const AttentionShape& s) {
  if (s.batch < 0 || s.seq < 0 || s.batch > 65535)
    return "attention_f32: batch " + i2s(s.batch) + " and seq " + i2s(s.seq) + " must be >= 0 (batch <= 65535)";
  if (s.head_dim < 1 || s.head_dim > kAttentionMaxHeadDim)
    return "attention_f32: head_dim " + i2s(s.head_dim) + " is not in [1, " + i2s(kAttentionMaxHeadDim) + "]";
  if (s.heads < 1 || s.kv_heads < 1 || s.heads % s.kv_heads != 0)
    return "attention_f32: heads " + i2s(s.heads) + " must be a positive multiple of kv_heads " + i2s(s.kv_heads);
  if (s.head_begin < 0 || s.head_begin >= s.head_end || s.head_end > s.heads)
    return "attention_f32: head range [" + i2s(s.head_begin) + ", " + i2s(s.head_end) +
           ") is not a non-empty range within [0, " + i2s(s.heads) + ")";
  if (s.window < 0) return "attention_f32: window " + i2s(s.window) + " is negative";
  const std::int64_t qw = s.heads * s.head_dim, kw = s.kv_heads * s.head_dim;
  if (s.ldq < qw || s.ldy < qw || s.ldk < kw || s.ldv < kw)
    return "attention_f32: leading dimensions ldq " + i2s(s.ldq) + ", ldy " + i2s(s.ldy) + " (need >= " + i2s(qw) +
           "), ldk " + i2s(s.ldk) + ", ldv " + i2s(s.ldv) + " (need >= " + i2s(kw) + ")";
  if ((s.seq + kBq - 1) / kBq > INT_MAX) return "attention_f32: seq " + i2s(s.seq) + " too long";
  return "";
}

void attention_f32(const float* q, const float* k, const float* v, float* y, const AttentionShape& s, bool causal,
                   float scale, void* stream) {
  if (std::string e = attention_shape_error(s); !e.empty()) throw std::invalid_argument(e);
  if (s.batch == 0 || s.seq == 0) return;
  AttnArgs a{q, k, v, y, s.seq, s.head_dim, s.heads / s.kv_heads, s.head_begin, s.ldq, s.ldk, s.ldv, s.ldy,
             scale, causal, s.window};
  const dim3 grid(unsigned((s.seq + kBq - 1) / kBq), unsigned(s.head_end - s.head_begin), unsigned(s.batch));
  attention_kernel<<<grid, kWarps * 32, 0, as_stream(stream)>>>(a);
  check(cudaGetLastError(), "attention_f32 launch");
}

std::int64_t embedding_f32(const std::int32_t* ids, std::int64_t n, std::int64_t ids_cols, std::int64_t ids_ld,
                           const float* table, std::int64_t vocab, std::int64_t d, std::int64_t table_ld, float* y,
                           std::int64_t y_ld, std::int64_t* bad_id, void* stream) {
  if (n < 0 || n > INT_MAX || ids_cols < 1 || ids_ld < ids_cols || vocab < 0 || d < 0 || table_ld < d || y_ld < d)
    throw std::invalid_argument("embedding_f32: bad sizes n=" + i2s(n) + " ids_cols=" + i2s(ids_cols) +
                                " ids_ld=" + i2s(ids_ld) + " vocab=" + i2s(vocab) + " d=" + i2s(d) +
                                " table_ld=" + i2s(table_ld) + " y_ld=" + i2s(y_ld));
  if (n == 0) return -1;
  cudaStream_t st = as_stream(stream);
  unsigned long long* first_bad = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&first_bad), sizeof *first_bad, st), "embedding_f32 cudaMallocAsync");
  unsigned long long host_bad = ~0ull;
  std::int32_t host_id = 0;
  try {
    check(cudaMemsetAsync(first_bad, 0xff, sizeof *first_bad, st), "embedding_f32 cudaMemsetAsync");
    embedding_kernel<<<unsigned(n), 128, 0, st>>>(ids, ids_cols, ids_ld, table, vocab, d, table_ld, y, y_ld,
                                                  first_bad);
    check(cudaGetLastError(), "embedding_f32 launch");
    check(cudaMemcpyAsync(&host_bad, first_bad, sizeof host_bad, cudaMemcpyDeviceToHost, st),
          "embedding_f32 cudaMemcpyAsync");
    check(cudaStreamSynchronize(st), "embedding_f32 cudaStreamSynchronize");
    if (host_bad != ~0ull) {
      const std::int64_t i = std::int64_t(host_bad);
      check(cudaMemcpyAsync(&host_id, ids + (i / ids_cols) * ids_ld + i % ids_cols, sizeof host_id,
                            cudaMemcpyDeviceToHost, st),
            "embedding_f32 cudaMemcpyAsync");
      check(cudaStreamSynchronize(st), "embedding_f32 cudaStreamSynchronize");
    }
  } catch (...) {
    (void)cudaFreeAsync(first_bad, st);
    throw;
  }
  check(cudaFreeAsync(first_bad, st), "embedding_f32 cudaFreeAsync");
  if (host_bad == ~0ull) return -1;
  if (bad_id) *bad_id = host_id;
  return std::int64_t(host_bad);
}

void rope_f32(float* x, std::int64_t rows, std::int64_t ldx, std::int64_t heads, std::int64_t head_dim,
              std::int64_t rotary_dim, std::int64_t seq, std::int64_t offset, double base, bool interleaved,
              void* stream) {
  if (rows < 0 || heads < 1 || head_dim < 1 || rotary_dim < 0 || rotary_dim > head_dim || rotary_dim % 2 != 0 ||
      seq < 1 || offset < 0 || ldx < heads * head_dim || !(base > 0))
    throw std::invalid_argument("rope_f32: bad arguments rows=" + i2s(rows) + " ldx=" + i2s(ldx) + " heads=" +
                                i2s(heads) + " head_dim=" + i2s(head_dim) + " rotary_dim=" + i2s(rotary_dim) +
                                " seq=" + i2s(seq) + " offset=" + i2s(offset) + " base=" + std::to_string(base));
  const std::int64_t half = rotary_dim / 2, total = rows * heads * half;
  if (total == 0) return;
  const std::int64_t blocks = (total + 255) / 256;
  rope_kernel<<<unsigned(blocks < 65535 ? blocks : 65535), 256, 0, as_stream(stream)>>>(
      x, rows, ldx, heads, head_dim, half, rotary_dim, seq, offset, base, interleaved);
  check(cudaGetLastError(), "rope_f32 launch");
}

}  // namespace ymlopt::nn::cuda
