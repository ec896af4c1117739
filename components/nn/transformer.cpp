// Transformer building blocks (f32 and f64 unless noted), on row-major 2-D
// strided views; activations are [tokens, features] with tokens = batch*seq.
//
//   nn.embedding             y[i,:] = table[ids[i],:] (float table, or int8/int4 codes + scales)
//   nn.layernorm             y = (x - mean) / sqrt(var + eps) * gamma + beta   (biased variance)
//   nn.rmsnorm               y = x / sqrt(mean(x^2) + eps) * weight
//   nn.linear                y (+)= act(x W + b), one GEMM, W as [k,n] or [n,k]
//   nn.attention             multi-head / grouped-query scaled dot-product attention
//   nn.rope                  rotary position embedding, in place ("half" or "interleaved" pairs)
//   nn.positions             a step's positions from the tokens already cached
//   nn.kv_append             a step's keys or values written into a KV cache
//   nn.kv_attention          attention of a step's queries over a KV cache
//   nn.kv_blocks             a batch's KV cache blocks, given and taken back
//   nn.sample                the next token: greedy, or temperature / top-k / top-p / min-p
//   nn.sinusoidal_positions  the sinusoidal position table
//   nn.swiglu                y = silu(gate) * up
//   nn.tanh                  y = tanh(x)
//   nn.l2normalize           y = x / max(||x||_2, eps), row-wise
//   nn.pool                  per-sequence mean/sum/max/first/last pooling
//
// Reductions accumulate in double; matrix products go to OpenBLAS (one GEMM
// for nn.linear, two per head, sequence and query block for nn.attention).
//
// Each component's ports, checks and kernels are in a file of its own
// (transformer_internal.hpp lists them); this file registers them, with the
// hooks through which the engine prices nn.linear (linear_rate) and binds the
// companions of compressed weights (linear_reader, embedding_reader).

#include <string>
#include <utility>
#include <vector>

#include "nn/nn.hpp"
#include "nn/transformer_internal.hpp"
#include <ymlopt/kernel_util.hpp>
#if YMLOPT_HAVE_CLBLAST
#include "nn/transformer_linear_opencl.hpp"
#endif

#if YMLOPT_HAVE_OPENCL
#include "nn/transformer_opencl.hpp"
#endif

namespace ymlopt {
namespace {

using namespace transformer;

#if YMLOPT_HAVE_CUDA
#define YMLOPT_CUDA_KERNEL(op) op##_cuda, op##_cuda_check
#else
#define YMLOPT_CUDA_KERNEL(op) nullptr, nullptr
#endif

#if YMLOPT_HAVE_OPENCL
#define YMLOPT_OPENCL_KERNEL(op) op##_opencl, op##_opencl_check
#else
#define YMLOPT_OPENCL_KERNEL(op) nullptr, nullptr
#endif

/// s with its OpenCL kernel and the tasks that kernel handles (transformer_opencl.hpp; none without OpenCL).
ComponentSpec with_opencl(ComponentSpec s, KernelFn opencl, std::string (*opencl_check)(const TaskShape&)) {
  s.opencl = opencl;
  if (opencl_check) s.opencl_check = opencl_check;
  return s;
}

}  // namespace

void register_transformer(Registry& reg) {
  const ParamSpec seq = {"seq", ParamType::int_, "0", false,
                         "sequence length (rows per sequence); 0: all rows are one sequence"};

  ComponentSpec embedding = with_opencl(kutil::make_component("nn.embedding",
      "y[i, :] = table[ids[i], :]; an id outside [0, vocab) is an error naming its position. format int8/int4: "
      "only the rows requested are dequantized, (code - zero) * scale, into f32 y",
      embedding_ports(),
      {{"format", ParamType::string_, "dense", false,
        "table representation: dense (float table), bf16 (a bf16 table read into f32 y), int8 or int4 (codes in "
        "table, table_scale, optional table_zero; the layout of quant.int8 / quant.group on W = table [vocab, d]); "
        "compressed tables give f32 y"},
       {"group", ParamType::int_, "0", false, "int8/int4: table elements per scale along d; 0: one scale per row"}},
      embedding_cpu, embedding_check, embedding_cost, YMLOPT_CUDA_KERNEL(embedding)), YMLOPT_OPENCL_KERNEL(embedding));
  embedding.compressed = embedding_reader();
  reg.add(std::move(embedding));
  reg.add(with_opencl(kutil::make_component("nn.layernorm",
      "row-wise layer normalization: y = (x - mean) / sqrt(var + eps) * gamma + beta, biased variance (as PyTorch)",
      layernorm_ports(), {{"eps", ParamType::float_, "1e-5", false, "added to the variance"}}, layernorm_cpu,
      layernorm_check, layernorm_cost, YMLOPT_CUDA_KERNEL(layernorm)), YMLOPT_OPENCL_KERNEL(layernorm)));
  reg.add(with_opencl(kutil::make_component("nn.rmsnorm",
      "row-wise RMS normalization: y = x / sqrt(mean(x^2) + eps) * weight (as LLaMA)", rmsnorm_ports(),
      {{"eps", ParamType::float_, "1e-6", false, "added to the mean square"}}, rmsnorm_cpu, rmsnorm_check,
      rmsnorm_cost, YMLOPT_CUDA_KERNEL(rmsnorm)), YMLOPT_OPENCL_KERNEL(rmsnorm)));
  ComponentSpec linear = kutil::make_component("nn.linear",
      "y = act(x W + b), or y = r + act(x W + b) with the optional residual r (fused residual add; r may be y "
      "itself); one GEMM, bias and "
      "activation fused in one pass over y. W is [k, n] (GPT-2 Conv1D) or [n, k] with transpose_w (torch Linear). "
      "y and w may be column tiles (ld > cols) of wider tensors.",
      linear_ports(),
      {{"transpose_w", ParamType::bool_, "false", false, "false: w is [k, n]; true: w is [n, k]"},
       {"activation", ParamType::string_, "none", false,
        "none, relu, gelu (exact erf form), gelu_tanh (tanh approximation, GPT-2 'gelu_new') or silu"},
       {"format", ParamType::string_, "dense", false,
        "weight representation: dense, int8 or int4 (codes in w, w_scale, optional w_zero), csr (w values, "
        "w_index columns, w_ptr rows), bsr (blocks, arg block), nm24 (2:4: w kept values, w_index positions), "
        "bf16 (w bf16; x rounded to bf16, products summed in f32); compressed W is [n, k] and needs f32 x"},
       {"group", ParamType::int_, "0", false, "int8/int4: weights per scale along k; 0: one scale per row"},
       {"block", ParamType::int_, "0", false, "bsr: block size"},
       {"activations", ParamType::string_, "int8", false,
        "int8/int4: int8 (x quantized per token, the integer VNNI kernels) or f32 (weight-only: the codes "
        "dequantized a block of rows at a time in cache, then an f32 GEMM)"},
       {"keep_panels", ParamType::bool_, "true", false,
        "true: a weight the run reads twice or more is packed into the kernel's panels once and kept (f32, and "
        "int8/int4 on AVX-512 VNNI); false: packed per call, no copy kept (a weight read a few times, as by a "
        "pipeline stage's micro-batches, where the copy doubles its memory and packing does not pay)"}},
      linear_cpu, linear_check, linear_cost, YMLOPT_CUDA_KERNEL(linear));
  linear.rate = linear_rate;
  linear.compressed = linear_reader();
#if YMLOPT_HAVE_CLBLAST
  linear.opencl = linear_opencl;  // CLBlast's SGEMM and an epilogue kernel (transformer_linear_opencl.cpp)
  linear.opencl_check = linear_opencl_check;
#endif
  reg.add(std::move(linear));
  reg.add(with_opencl(kutil::make_component("nn.attention",
      "scaled dot-product attention per head and sequence: y_h = softmax(scale * q_h k_g^T [+ causal mask]) v_g, "
      "g = h / (heads / kv_heads) (grouped-query attention); rows are batch*seq tokens; only heads "
      "[head_begin, head_end) are computed and written. Memory: one [128, seq] score block.",
      attention_ports(),
      {{"heads", ParamType::int_, "", true, "number of query heads (q has heads*dh columns)"},
       {"kv_heads", ParamType::int_, "0", false, "number of key/value heads; 0: heads (must divide heads)"},
       seq,
       {"causal", ParamType::bool_, "false", false, "mask keys after the query position"},
       {"window", ParamType::int_, "0", false,
        "causal: a sliding window, query i attends keys i - window < j <= i (Mistral); 0: every earlier key"},
       {"scale", ParamType::float_, "0", false, "score scale; 0: 1/sqrt(dh)"},
       {"head_begin", ParamType::int_, "0", false, "first head computed"},
       {"head_end", ParamType::int_, "0", false, "one past the last head computed; 0 with head_begin=0: all heads"}},
      attention_cpu, attention_check, attention_cost, YMLOPT_CUDA_KERNEL(attention)), YMLOPT_OPENCL_KERNEL(attention)));
  reg.add(with_opencl(kutil::make_component("nn.rope",
      "rotary position embedding in place: each head's pairs (x_a, x_b) are rotated by angle "
      "pos * base^(-2i/rotary_dim), pos = positions[row] when that port is bound, else row % seq + offset; style 'half' pairs (i, i + rotary_dim/2) (LLaMA/HF "
      "rotate_half, GPT-NeoX), 'interleaved' pairs (2i, 2i+1) (GPT-J)",
      rope_ports(),
      {{"heads", ParamType::int_, "", true, "number of heads (x has heads*dh columns)"},
       seq,
       {"base", ParamType::float_, "10000", false, "frequency base (theta)"},
       {"offset", ParamType::int_, "0", false, "position of the first row of each sequence"},
       {"style", ParamType::string_, "half", false, "'half' (rotate_half) or 'interleaved' (GPT-J)"},
       {"rotary_dim", ParamType::int_, "0", false, "rotate only the first rotary_dim dims of each head; 0: dh"}},
      rope_cpu, rope_check, rope_cost, YMLOPT_CUDA_KERNEL(rope)), YMLOPT_OPENCL_KERNEL(rope)));
  kutil::add_component(reg, "nn.positions",
      "positions[r] = pos + r for the rows of a generation step, then pos += rows (pos: the tokens already in the "
      "KV cache); a batch (seq bound): each row takes its sequence's next position, -1 for a finished sequence",
      positions_ports(), {}, positions_cpu, positions_check, positions_cost);
  kutil::add_component(reg, "nn.kv_blocks",
      "a batch's KV cache in blocks of `block` tokens from a pool: the blocks of finished sequences go back, then "
      "each row's sequence gets a block for its position if it has none (the lowest free one); a full pool is an "
      "error. With a sliding window, the blocks every query of the step has left behind go back too",
      kv_blocks_ports(),
      {{"block", ParamType::int_, "", true, "tokens per block"},
       {"window", ParamType::int_, "0", false, "the attention's sliding window (nn.kv_attention's); 0: none"}},
      kv_blocks_cpu, kv_blocks_check, kv_blocks_cost);
  kutil::add_component(reg, "nn.kv_append",
      "cache[positions[r], :] = x[r, :]: a step's keys or values written into a KV cache [context, width], stored "
      "as x, as f16, or as int8 codes with one scale per row and head (max|x| / 127); a position outside the cache "
      "is an error (the context is full); a batch (seq and table bound): at the row of each position's block",
      kv_append_ports(),
      {{"heads", ParamType::int_, "1", false, "heads in a row (an i8 cache: a scale each)"},
       {"block", ParamType::int_, "0", false, "a batch: tokens per block of the table"}},
      kv_append_cpu, kv_append_check, kv_append_cost);
  kutil::add_component(reg, "nn.kv_attention",
      "attention over a KV cache: query row r (head h) attends cache rows 0 .. positions[r] (a sliding window: "
      "the last `window` of them) of kv head h / (heads / kv_heads): y = softmax(scale q k^T) v; an f16 or i8 "
      "cache is widened row by row. The causal prefill of a prompt and each one-token decode step alike",
      kv_attention_ports(),
      {{"heads", ParamType::int_, "", true, "number of query heads (q has heads*dh columns)"},
       {"kv_heads", ParamType::int_, "0", false, "number of key/value heads; 0: heads (must divide heads)"},
       {"window", ParamType::int_, "0", false,
        "a sliding window: position p attends p - window < j <= p (Mistral); 0: every earlier position"},
       {"scale", ParamType::float_, "0", false, "score scale; 0: 1/sqrt(dh)"},
       {"block", ParamType::int_, "0", false, "a batch: tokens per block of the table"}},
      kv_attention_cpu, kv_attention_check, kv_attention_cost);
  kutil::add_component(reg, "nn.sample",
      "the next token from the last row of logits: greedy (temperature 0: the first largest logit) or drawn from "
      "softmax(logits / temperature) restricted to the top_k largest, the smallest set reaching probability top_p and "
      "those above min_p times the top one; the draw hashes (seed, count). Appends it to 'generated' and clears "
      "'running' at an end token or when 'generated' is full",
      sample_ports(),
      {{"temperature", ParamType::float_, "0", false, "0: greedy; > 0: sampling temperature"},
       {"top_k", ParamType::int_, "0", false, "keep the k largest logits; 0: all"},
       {"top_p", ParamType::float_, "1", false, "keep the smallest set of tokens whose probability reaches top_p"},
       {"min_p", ParamType::float_, "0", false, "drop tokens below min_p times the most likely one's probability"},
       {"seed", ParamType::int_, "0", false, "seed of the draws"},
       {"eos", ParamType::string_, "", false, "end tokens, comma-separated ids (e.g. '2' or '128001,128009')"}},
      sample_cpu, sample_check, sample_cost);
  kutil::add_component(reg, "nn.sinusoidal_positions",
      "sinusoidal position table: layout 'interleaved' (Attention is all you need): y[p, 2i] = sin(p / "
      "base^(2i/d)), y[p, 2i+1] = cos(p / base^(2i/d)); layout 'concat' (tensor2tensor get_timing_signal_1d, USE): "
      "y[p, i] = sin(p * f_i), y[p, d/2 + i] = cos(p * f_i), f_i = base^(-i/(d/2 - 1)), a zero last column when d "
      "is odd. p = row + offset",
      sinus_ports(),
      {{"layout", ParamType::string_, "interleaved", false, "'interleaved' or 'concat'"},
       {"base", ParamType::float_, "10000", false, "maximum timescale"},
       {"offset", ParamType::int_, "0", false, "position of the first row"}},
      sinus_cpu, sinus_check, sinus_cost);
  reg.add(with_opencl(kutil::make_component("nn.swiglu", "y = silu(gate) * up = gate * sigmoid(gate) * up",
      swiglu_ports(), {}, swiglu_cpu, swiglu_check, swiglu_cost), YMLOPT_OPENCL_KERNEL(swiglu)));
  kutil::add_component(reg, "nn.tanh", "y = tanh(x)", tanh_ports(), {}, tanh_cpu, tanh_check, tanh_cost);
  kutil::add_component(reg, "nn.l2normalize", "row-wise y = x / max(||x||_2, eps)", l2n_ports(),
      {{"eps", ParamType::float_, "1e-12", false, "lower bound of the norm"}}, l2n_cpu, l2n_check, l2n_cost);
  kutil::add_component(reg, "nn.pool",
      "pools each sequence of seq rows to one row: mean, sum (optionally / sqrt(length)), max, first (CLS) or last "
      "row; only the first `length` rows of each sequence count",
      pool_ports(),
      {seq,
       {"mode", ParamType::string_, "mean", false, "mean, sum, max, first or last"},
       {"scale", ParamType::string_, "none", false, "none, or sqrt_len (mode sum: divide by sqrt(length), as USE)"},
       {"length", ParamType::int_, "0", false, "rows of each sequence that count (padding after); 0: seq"}},
      pool_cpu, pool_check, pool_cost);
}

}  // namespace ymlopt
