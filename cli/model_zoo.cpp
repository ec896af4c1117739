#include "model_zoo.hpp"

#include <map>
#include <stdexcept>

namespace ymlopt {
namespace {

struct Preset {
  const char* arch;
  const char* name;
  ArchConfig cfg;
};

ArchConfig make(const char* arch, const char* name, std::int64_t layers, std::int64_t width, std::int64_t heads,
                std::int64_t kv_heads, std::int64_t ffn, std::int64_t vocab, std::int64_t context,
                std::int64_t type_vocab = 0) {
  ArchConfig c;
  c.arch = arch;
  c.preset = name;
  c.layers = layers, c.width = width, c.heads = heads, c.kv_heads = kv_heads, c.ffn = ffn;
  c.vocab = vocab, c.context = context, c.type_vocab = type_vocab;
  return c;
}

const std::vector<ArchConfig>& presets() {
  static const std::vector<ArchConfig> p = {
      // the published shapes
      make("gpt2", "124M", 12, 768, 12, 12, 3072, 50257, 1024),
      make("gpt2", "355M", 24, 1024, 16, 16, 4096, 50257, 1024),
      make("gpt2", "774M", 36, 1280, 20, 20, 5120, 50257, 1024),
      make("bert", "base", 12, 768, 12, 12, 3072, 30522, 512, 2),
      make("bert", "large", 24, 1024, 16, 16, 4096, 30522, 512, 2),
      make("llama", "1.1B", 22, 2048, 32, 4, 5632, 32000, 2048),  // TinyLlama-1.1B shapes
      make("llama", "7B", 32, 4096, 32, 32, 11008, 32000, 4096),
      // small configurations with awkward sizes, for tests
      make("gpt2", "tiny", 2, 96, 3, 3, 384, 512, 64),
      make("bert", "tiny", 2, 96, 6, 6, 200, 512, 64, 2),
      make("llama", "tiny", 2, 96, 6, 2, 160, 512, 64),
  };
  return p;
}

}  // namespace

std::vector<std::string> arch_preset_names(const std::string& arch) {
  std::vector<std::string> v;
  for (const auto& p : presets())
    if (p.arch == arch) v.push_back(p.preset);
  return v;
}

ArchConfig arch_preset(const std::string& arch, const std::string& preset) {
  for (const auto& p : presets())
    if (p.arch == arch && p.preset == preset) return p;
  const auto names = arch_preset_names(arch);
  if (names.empty()) throw std::invalid_argument("unknown architecture '" + arch + "' (expected gpt2, bert or llama)");
  std::string list;
  for (const auto& n : names) {
    if (!list.empty()) list += ", ";
    list += n;
  }
  throw std::invalid_argument("unknown " + arch + " preset '" + preset + "' (expected " + list + ")");
}

std::vector<WeightSpec> weight_specs(const ArchConfig& c) {
  std::vector<WeightSpec> w;
  const std::int64_t d = c.width, f = c.ffn;
  auto add = [&](std::string name, std::vector<std::int64_t> shape, WeightInit init = WeightInit::normal) {
    w.push_back({std::move(name), std::move(shape), init});
  };
  if (c.arch == "gpt2") {
    add("wte.weight", {c.vocab, d});
    add("wpe.weight", {c.context, d});
    for (std::int64_t i = 0; i < c.layers; ++i) {
      const std::string p = "h." + std::to_string(i) + ".";
      add(p + "ln_1.weight", {d}, WeightInit::ones);
      add(p + "ln_1.bias", {d}, WeightInit::zeros);
      add(p + "attn.c_attn.weight", {d, 3 * d});
      add(p + "attn.c_attn.bias", {3 * d}, WeightInit::zeros);
      add(p + "attn.c_proj.weight", {d, d});
      add(p + "attn.c_proj.bias", {d}, WeightInit::zeros);
      add(p + "ln_2.weight", {d}, WeightInit::ones);
      add(p + "ln_2.bias", {d}, WeightInit::zeros);
      add(p + "mlp.c_fc.weight", {d, f});
      add(p + "mlp.c_fc.bias", {f}, WeightInit::zeros);
      add(p + "mlp.c_proj.weight", {f, d});
      add(p + "mlp.c_proj.bias", {d}, WeightInit::zeros);
    }
    add("ln_f.weight", {d}, WeightInit::ones);
    add("ln_f.bias", {d}, WeightInit::zeros);
  } else if (c.arch == "bert") {
    add("embeddings.word_embeddings.weight", {c.vocab, d});
    add("embeddings.position_embeddings.weight", {c.context, d});
    add("embeddings.token_type_embeddings.weight", {c.type_vocab, d});
    add("embeddings.LayerNorm.weight", {d}, WeightInit::ones);
    add("embeddings.LayerNorm.bias", {d}, WeightInit::zeros);
    for (std::int64_t i = 0; i < c.layers; ++i) {
      const std::string p = "encoder.layer." + std::to_string(i) + ".";
      for (const char* m : {"query", "key", "value"}) {
        add(p + "attention.self." + m + ".weight", {d, d});
        add(p + "attention.self." + m + ".bias", {d}, WeightInit::zeros);
      }
      add(p + "attention.output.dense.weight", {d, d});
      add(p + "attention.output.dense.bias", {d}, WeightInit::zeros);
      add(p + "attention.output.LayerNorm.weight", {d}, WeightInit::ones);
      add(p + "attention.output.LayerNorm.bias", {d}, WeightInit::zeros);
      add(p + "intermediate.dense.weight", {f, d});
      add(p + "intermediate.dense.bias", {f}, WeightInit::zeros);
      add(p + "output.dense.weight", {d, f});
      add(p + "output.dense.bias", {d}, WeightInit::zeros);
      add(p + "output.LayerNorm.weight", {d}, WeightInit::ones);
      add(p + "output.LayerNorm.bias", {d}, WeightInit::zeros);
    }
    add("pooler.dense.weight", {d, d});
    add("pooler.dense.bias", {d}, WeightInit::zeros);
  } else if (c.arch == "llama") {
    const std::int64_t dh = d / c.heads;
    add("model.embed_tokens.weight", {c.vocab, d});
    for (std::int64_t i = 0; i < c.layers; ++i) {
      const std::string p = "model.layers." + std::to_string(i) + ".";
      add(p + "input_layernorm.weight", {d}, WeightInit::ones);
      add(p + "self_attn.q_proj.weight", {c.heads * dh, d});
      add(p + "self_attn.k_proj.weight", {c.kv_heads * dh, d});
      add(p + "self_attn.v_proj.weight", {c.kv_heads * dh, d});
      add(p + "self_attn.o_proj.weight", {d, c.heads * dh});
      add(p + "post_attention_layernorm.weight", {d}, WeightInit::ones);
      add(p + "mlp.gate_proj.weight", {f, d});
      add(p + "mlp.up_proj.weight", {f, d});
      add(p + "mlp.down_proj.weight", {d, f});
    }
    add("model.norm.weight", {d}, WeightInit::ones);
    add("lm_head.weight", {c.vocab, d});
  } else {
    throw std::invalid_argument("unknown architecture '" + c.arch + "' (expected gpt2, bert or llama)");
  }
  return w;
}

std::int64_t parameter_count(const ArchConfig& c) {
  std::int64_t n = 0;
  for (const auto& w : weight_specs(c)) {
    std::int64_t e = 1;
    for (auto x : w.shape) e *= x;
    n += e;
  }
  return n;
}

}  // namespace ymlopt
