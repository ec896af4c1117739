#pragma once
// The components the optimizer's passes find in a model or run on its weights,
// by the names their families register them under: the one place a pass names
// a component. (Pass names, such as quant.int8 in --passes, are the passes' own
// and live in the pass table.)
//
//   if (t.comp->name == components::kLinear) ...
//   run_component(reg, components::kPruneNm, ports, args);

namespace ymlopt::opt::components {

// model tasks the passes read and rewrite (nn, io)
inline constexpr const char* kLinear = "nn.linear";
inline constexpr const char* kEmbedding = "nn.embedding";
inline constexpr const char* kLayerNorm = "nn.layernorm";
inline constexpr const char* kRmsNorm = "nn.rmsnorm";
inline constexpr const char* kAttention = "nn.attention";
inline constexpr const char* kRope = "nn.rope";
inline constexpr const char* kSwiglu = "nn.swiglu";
inline constexpr const char* kRelu = "nn.relu";
inline constexpr const char* kGelu = "nn.gelu";
inline constexpr const char* kSilu = "nn.silu";
inline constexpr const char* kTanh = "nn.tanh";
inline constexpr const char* kSave = "io.save";
inline constexpr const char* kOpMatmul = "op.matmul";
inline constexpr const char* kTensorAdd = "tensor.add";
inline constexpr const char* kTensorScale = "tensor.scale";
inline constexpr const char* kTensorFill = "tensor.fill";

// kernels the passes run on weights (blas, quant, prune, sparse)
inline constexpr const char* kGemm = "blas.gemm";
inline constexpr const char* kTensorCopy = "tensor.copy";
inline constexpr const char* kQuantInt8 = "quant.int8";
inline constexpr const char* kQuantGroup = "quant.group";
inline constexpr const char* kQuantQ8_0 = "quant.q8_0";
inline constexpr const char* kQuantQ4_0 = "quant.q4_0";
inline constexpr const char* kQuantGptq = "quant.gptq";
inline constexpr const char* kPruneMagnitude = "prune.magnitude";
inline constexpr const char* kPruneNm = "prune.nm";
inline constexpr const char* kPruneHessian = "prune.hessian";
inline constexpr const char* kPruneObs = "prune.obs";
inline constexpr const char* kPruneLowrank = "prune.lowrank";
inline constexpr const char* kPruneHeads = "prune.heads";
inline constexpr const char* kPruneNeurons = "prune.neurons";
inline constexpr const char* kDistillLayerwise = "distill.layerwise";
inline constexpr const char* kSparsePackNm24 = "sparse.pack_nm24";

}  // namespace ymlopt::opt::components
