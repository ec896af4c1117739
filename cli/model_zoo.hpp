#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace ymlopt {

/// A transformer architecture's hyper-parameters, as the model workflows
/// (workflows/models/*.xml) take them.
///
///   ArchConfig c = arch_preset("gpt2", "124M");
///   for (const WeightSpec& w : weight_specs(c)) ...   // HF tensor names and shapes
struct ArchConfig {
  std::string arch;     // gpt2 | bert | llama
  std::string preset;
  std::int64_t layers = 0;
  std::int64_t width = 0;     // d_model
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;  // llama (grouped-query attention); = heads otherwise
  std::int64_t ffn = 0;       // feed-forward width
  std::int64_t vocab = 0;
  std::int64_t context = 0;   // maximum positions (learned position tables)
  std::int64_t type_vocab = 0;  // bert token types
};

/// How a weight is initialised by `ymlopt model init`.
enum class WeightInit { normal, ones, zeros };

/// One weight of a checkpoint: the architecture's usual tensor name and shape.
struct WeightSpec {
  std::string name;
  std::vector<std::int64_t> shape;
  WeightInit init = WeightInit::normal;
};

/// Named presets per architecture (throws std::invalid_argument listing them).
ArchConfig arch_preset(const std::string& arch, const std::string& preset);
std::vector<std::string> arch_preset_names(const std::string& arch);
/// Every weight, in checkpoint order, with the family's tensor names:
/// GPT-2 `h.{i}.attn.c_attn.weight` ([in, out] Conv1D layout), BERT
/// `encoder.layer.{i}.attention.self.query.weight` and LLaMA
/// `model.layers.{i}.self_attn.q_proj.weight` ([out, in] nn.Linear layout).
std::vector<WeightSpec> weight_specs(const ArchConfig& c);
std::int64_t parameter_count(const ArchConfig& c);

}  // namespace ymlopt
