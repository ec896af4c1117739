// CUDA kernels of nn.attention, nn.embedding and nn.rope (transformer_cuda_kernels.cpp),
// f32. Pointers are device pointers, row-major with a leading dimension in
// elements; `stream` is a cudaStream_t (nullptr: the default stream). Every
// CUDA call is checked and a failure throws std::runtime_error naming it; bad
// sizes throw std::invalid_argument before anything is launched.
//
//   namespace cu = ymlopt::nn::cuda;
//   cu::AttentionShape s{.batch = 2, .seq = 128, .heads = 12, .kv_heads = 12, .head_dim = 64,
//                        .head_begin = 0, .head_end = 12, .ldq = 768, .ldk = 768, .ldv = 768, .ldy = 768};
//   cu::attention_f32(d_q, d_k, d_v, d_y, s, /*causal=*/true, 0.125f, stream);
#pragma once

#include <cstdint>
#include <string>

namespace ymlopt::nn::cuda {

/// The largest head dimension attention_f32 handles.
inline constexpr std::int64_t kAttentionMaxHeadDim = 128;

/// Layout of one nn.attention task: batch * seq token rows; q, y have heads *
/// head_dim columns (head h at columns h*head_dim), k, v kv_heads * head_dim
/// (query head h reads kv head h / (heads / kv_heads)). Only heads
/// [head_begin, head_end) are computed and written. window > 0 (causal): query
/// i attends keys i - window < j <= i.
struct AttentionShape {
  std::int64_t batch = 0, seq = 0, heads = 0, kv_heads = 0, head_dim = 0, head_begin = 0, head_end = 0;
  std::int64_t ldq = 0, ldk = 0, ldv = 0, ldy = 0;
  std::int64_t window = 0;
};

/// "" when attention_f32 accepts `s`, else what is wrong (head_dim above 128,
/// a leading dimension shorter than the heads' columns, ...).
std::string attention_shape_error(const AttentionShape& s);

/// Fused flash-style attention forward: y_h = softmax(scale * q_h k_g^T [+ causal
/// mask]) v_g per sequence, with an online softmax over 32-key blocks held in
/// shared memory (never a seq x seq matrix). Throws std::invalid_argument when
/// attention_shape_error(s) is not "".
void attention_f32(const float* q, const float* k, const float* v, float* y, const AttentionShape& s, bool causal,
                   float scale, void* stream);

/// y[i, :] = table[ids[i], :] for n ids, id i at ids[(i / ids_cols) * ids_ld + i % ids_cols]
/// (a [n] vector: ids_cols = ids_ld = n; a [n, 1] column: ids_cols = 1).
/// Returns -1, or the position of the first id outside [0, vocab) (its row of
/// y is left unwritten) and sets *bad_id to it. Synchronises `stream` once to
/// read the result.
std::int64_t embedding_f32(const std::int32_t* ids, std::int64_t n, std::int64_t ids_cols, std::int64_t ids_ld,
                           const float* table, std::int64_t vocab, std::int64_t d, std::int64_t table_ld, float* y,
                           std::int64_t y_ld, std::int64_t* bad_id, void* stream);

/// Rotary position embedding in place on x [rows, ldx] of heads * head_dim
/// columns, as nn.rope: position p = row % seq + offset, pair i of the first
/// rotary_dim dims of each head rotated by p * base^(-2i/rotary_dim) (angle,
/// cos and sin in double as on the CPU); `interleaved` pairs (2i, 2i+1),
/// otherwise (i, i + rotary_dim/2).
void rope_f32(float* x, std::int64_t rows, std::int64_t ldx, std::int64_t heads, std::int64_t head_dim,
              std::int64_t rotary_dim, std::int64_t seq, std::int64_t offset, double base, bool interleaved,
              void* stream);

}  // namespace ymlopt::nn::cuda
