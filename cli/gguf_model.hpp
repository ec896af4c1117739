// llama and GPT-2 checkpoints between ymlopt's files (Hugging Face tensor
// names, safetensors; `ymlopt optimize`'s q8_0/q4_0 companions) and llama.cpp's
// GGUF, bit for bit: llama.cpp's Q8_0/Q4_0 blocks hold the same codes and f16
// scales as quant.q8_0/quant.q4_0, only arranged differently.
//
//   GgufExport e{arch_preset("llama", "1.1B")};
//   export_gguf("l.safetensors", "l.gguf", e);                // `ymlopt export`
//   GgufImport got = import_gguf("l.gguf", "l.safetensors");  // `ymlopt convert`
//
// Layouts as llama.cpp's convert_hf_to_gguf.py writes them: GPT-2's Conv1D
// weights transposed to [out, in]; LLaMA's q/k rows permuted from the Hugging
// Face RoPE layout (pairs i, i + d/2) to llama.cpp's (pairs 2i, 2i + 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model_zoo.hpp"

namespace ymlopt {

/// What an export writes besides the tensors.
struct GgufExport {
  ArchConfig cfg;             // arch, layers, width, heads, kv_heads, ffn, vocab, context
  double eps = 0;             // 0: the workflow's default (llama rmsnorm 1e-6, GPT-2 layernorm 1e-5)
  double rope_theta = 0;      // llama (0: 10000)
  bool f16 = false;           // dense 2-D weights as F16 (norms and biases stay F32)
  std::string name;           // general.name (default: the file's stem)
};

/// Writes `st_path`'s model as GGUF at `out` (atomically). cfg's fields left 0
/// come from what import_gguf recorded in the file (metadata
/// `ymlopt.hparams.*`), else the tensors (layers, width, ffn, vocab, GPT-2's
/// context; kv_heads from k_proj and heads); heads must be known. Quantized weights must
/// be llama.cpp's formats (int8 or int4, groups of 32, f16 scales, symmetric);
/// returns a line per fact worth telling (the placeholder vocabulary, types).
std::vector<std::string> export_gguf(const std::string& st_path, const std::string& out, GgufExport e);

/// A GGUF file's architecture and hyper-parameters, and the `--set` flags
/// that run the converted file with workflows/models/<arch>.xml.
struct GgufImport {
  ArchConfig cfg;
  double eps = 0, rope_theta = 0;
  std::vector<std::string> notes;
  std::string run_flags() const;
};

/// Writes `gguf_path`'s llama or GPT-2 model as safetensors at `out`: F32,
/// F16 and BF16 tensors as they are, Q8_0/Q4_0 as `<key>.w` / `<key>.w_scale`
/// companions with their `ymlopt.format.<key>` records (what `ymlopt
/// optimize` writes). Other types and unknown tensors are refused.
GgufImport import_gguf(const std::string& gguf_path, const std::string& out);

/// Infers gpt2 or llama from a safetensors file's tensor names ("" if neither).
std::string infer_arch(const std::string& st_path);

}  // namespace ymlopt
