#include "model_checkpoint.hpp"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <memory>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "io/shard_index.hpp"
#include "text/hf_tokenizer.hpp"
#include "ymlopt/scheduler/scratch_dir.hpp"
#include "ymlopt/half.hpp"
#include "ymlopt/parse_position.hpp"
#include "ymlopt/xml/diagnostic.hpp"

namespace ymlopt {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& where, const std::string& why) { throw ModelCheckpointError(where + ": " + why); }

std::string shape_str(const std::vector<std::int64_t>& s) {
  std::string o = "[";
  for (std::size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

/// Bytes per element of a safetensors dtype name (0: unknown).
std::int64_t stored_size(const std::string& t) {
  if (t == "F64" || t == "I64" || t == "U64") return 8;
  if (t == "F32" || t == "I32" || t == "U32") return 4;
  if (t == "F16" || t == "BF16" || t == "I16" || t == "U16") return 2;
  if (t == "I8" || t == "U8" || t == "BOOL" || t.rfind("F8", 0) == 0) return 1;
  return 0;
}

// ------------------------------------------------------------------ config.json

/// One config.json read by its HF names (the first of `names` present and not null).
struct ConfigReader {
  const std::string& file;
  const json& j;

  const json* find(std::initializer_list<const char*> names) const {
    for (const char* n : names)
      if (auto it = j.find(n); it != j.end() && !it->is_null()) return &*it;
    return nullptr;
  }
  std::int64_t count(std::initializer_list<const char*> names) const {
    const json* v = find(names);
    if (!v) return 0;
    if (!v->is_number_integer() || v->get<std::int64_t>() <= 0 || v->get<std::int64_t>() > (std::int64_t(1) << 40))
      fail(file, "'" + std::string(*names.begin()) + "' is " + v->dump() + ", not a positive integer");
    return v->get<std::int64_t>();
  }
  std::optional<double> real(const char* name) const {
    const json* v = find({name});
    if (!v) return std::nullopt;
    if (!v->is_number() || !(v->get<double>() > 0) || !std::isfinite(v->get<double>()))
      fail(file, "'" + std::string(name) + "' is " + v->dump() + ", not a positive number");
    return v->get<double>();
  }
  std::string text(const char* name) const {
    const json* v = find({name});
    if (!v) return "";
    if (!v->is_string()) fail(file, "'" + std::string(name) + "' is " + v->dump() + ", not a string");
    return v->get<std::string>();
  }
  std::optional<bool> flag(const char* name) const {
    const json* v = find({name});
    if (!v) return std::nullopt;
    if (!v->is_boolean()) fail(file, "'" + std::string(name) + "' is " + v->dump() + ", not true or false");
    return v->get<bool>();
  }
  /// `name` must be absent, null, or one of `ok` (what the workflow computes).
  void only(const char* name, std::initializer_list<const char*> ok, const std::string& what) const {
    const json* v = find({name});
    if (!v) return;
    for (const char* o : ok)
      if (v->is_string() && v->get<std::string>() == o) return;
    fail(file, "'" + std::string(name) + "' is " + v->dump() + ": " + what);
  }
};

}  // namespace

void apply_config(const std::string& file, const std::string& text, ModelCheckpoint& c) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(file, line_column(text, e.byte ? e.byte - 1 : 0) + ": not valid JSON");
  } catch (const json::exception& e) {  // a number out of range
    fail(file, std::string("not valid JSON: ") + json_reason(e));
  }
  if (!j.is_object()) fail(file, "a config is a JSON object");
  const ConfigReader r{file, j};
  const std::string type = r.text("model_type");
  if (type.empty()) fail(file, "no 'model_type' (gpt2, bert or llama)");
  c.model_type = type;
  ArchConfig& s = c.shape;
  if (type == "gpt2") {
    s.arch = "gpt2";
    s.layers = r.count({"n_layer", "num_hidden_layers"});
    s.width = r.count({"n_embd", "hidden_size"});
    s.heads = r.count({"n_head", "num_attention_heads"});
    s.ffn = r.count({"n_inner", "intermediate_size"});
    if (!s.ffn && s.width) s.ffn = 4 * s.width;  // n_inner null: 4 * n_embd
    s.vocab = r.count({"vocab_size"});
    s.context = r.count({"n_positions", "n_ctx", "max_position_embeddings"});
    c.eps = r.real("layer_norm_epsilon");
    r.only("activation_function", {"gelu_new", "gelu_pytorch_tanh"}, "the gpt2 workflow computes the tanh GELU (gelu_new)");
    c.tied = true;
  } else if (type == "bert") {
    s.arch = "bert";
    s.layers = r.count({"num_hidden_layers"});
    s.width = r.count({"hidden_size"});
    s.heads = r.count({"num_attention_heads"});
    s.ffn = r.count({"intermediate_size"});
    s.vocab = r.count({"vocab_size"});
    s.context = r.count({"max_position_embeddings"});
    s.type_vocab = r.count({"type_vocab_size"});
    c.eps = r.real("layer_norm_eps");
    r.only("hidden_act", {"gelu"}, "the bert workflow computes the exact (erf) GELU");
    r.only("position_embedding_type", {"absolute"}, "the bert workflow adds absolute position embeddings");
  } else if (type == "llama" || type == "mistral") {  // Mistral: LLaMA's tensors, and a sliding window
    s.arch = "llama";
    s.layers = r.count({"num_hidden_layers"});
    s.width = r.count({"hidden_size"});
    s.heads = r.count({"num_attention_heads"});
    s.kv_heads = r.count({"num_key_value_heads"});
    if (!s.kv_heads) s.kv_heads = s.heads;
    s.ffn = r.count({"intermediate_size"});
    s.vocab = r.count({"vocab_size"});
    s.context = r.count({"max_position_embeddings"});
    c.eps = r.real("rms_norm_eps");
    c.rope_theta = r.real("rope_theta");
    if (!c.rope_theta) c.rope_theta = 10000.0;
    c.tied = r.flag("tie_word_embeddings").value_or(false);
    r.only("hidden_act", {"silu"}, "the llama workflow computes SwiGLU (silu)");
    if (const json* v = r.find({"rope_scaling"}))
      fail(file, "'rope_scaling' is " + v->dump() + ": the llama workflow computes plain RoPE, without scaling");
    if (r.flag("use_sliding_window").value_or(true)) c.window = r.count({"sliding_window"});
    for (const char* b : {"attention_bias", "mlp_bias"})
      if (r.flag(b).value_or(false)) fail(file, std::string("'") + b + "' is true: the llama workflow has no such biases");
    if (const std::int64_t hd = r.count({"head_dim"}); hd && s.heads && s.width && hd * s.heads != s.width)
      fail(file, "'head_dim' " + std::to_string(hd) + " times " + std::to_string(s.heads) +
                     " heads is not hidden_size " + std::to_string(s.width) + ": the llama workflow needs it to be");
  } else {
    fail(file, "model_type '" + type + "': the model workflows compute gpt2, bert and llama (and mistral)" +
                   did_you_mean(type, {"gpt2", "bert", "llama", "mistral"}));
  }
  if (s.heads && s.width % s.heads) fail(file, "hidden size " + std::to_string(s.width) + " is not a multiple of " +
                                                   std::to_string(s.heads) + " heads");
  if (s.kv_heads && s.heads % s.kv_heads)
    fail(file, std::to_string(s.heads) + " heads are not a multiple of " + std::to_string(s.kv_heads) + " kv heads");
}

namespace {

// ------------------------------------------------------------------ weights

/// The weight files of PATH: sets c.weights and c.files.
void find_weights(const std::string& path, ModelCheckpoint& c) {
  std::error_code ec;
  const auto st = fs::status(path, ec);
  if (ec || !fs::exists(st)) fail(path, "no such file or folder");
  if (fs::is_directory(st)) {
    const fs::path dir(path);
    if (fs::exists(dir / "config.json")) c.config = (dir / "config.json").string();
    if (fs::exists(dir / "model.safetensors.index.json")) {
      c.weights = (dir / "model.safetensors.index.json").string();
    } else if (fs::exists(dir / "model.safetensors")) {
      c.weights = (dir / "model.safetensors").string();
    } else {
      std::vector<std::string> found, other;
      for (const auto& e : fs::directory_iterator(dir, ec)) {
        const std::string n = e.path().filename().string();
        if (e.path().extension() == ".safetensors") found.push_back(e.path().string());
        else if (io::is_shard_index(n) && n.find(".safetensors.") != std::string::npos) c.weights = e.path().string();
        else if (e.path().extension() == ".bin" || e.path().extension() == ".pt" || e.path().extension() == ".gguf")
          other.push_back(n);
      }
      std::sort(found.begin(), found.end());
      if (c.weights.empty() && found.size() == 1) c.weights = found[0];
      if (c.weights.empty() && found.size() > 1)
        fail(path, std::to_string(found.size()) +
                       " safetensors files and no model.safetensors.index.json naming which tensor each holds");
      if (c.weights.empty())
        fail(path, "no weights: expected model.safetensors, or shards and model.safetensors.index.json" +
                       (other.empty() ? std::string()
                                      : " (" + other[0] + " is not read: convert it to safetensors" +
                                            (other[0].ends_with(".gguf") ? " with `ymlopt convert`" : "") + ")"));
    }
  } else if (io::is_shard_index(path) || fs::path(path).extension() == ".safetensors") {
    c.weights = path;
  } else {
    fail(path, "not a checkpoint: expected a folder, a .safetensors file or a .safetensors.index.json" +
                   std::string(fs::path(path).extension() == ".gguf" ? " (convert GGUF with `ymlopt convert`)" : ""));
  }
  if (io::is_shard_index(c.weights)) {
    try {
      const io::ShardIndex ix = io::read_shard_index(c.weights);
      c.files = ix.shards;
      std::map<std::string, std::set<std::string>> held;
      for (const auto& f : c.files)
        for (const auto& t : io::list_tensors(f)) held[f].insert(t.name);
      for (const auto& [name, f] : ix.shard_of)
        if (!held[f].count(name)) fail(c.weights, "maps '" + name + "' to " + f + ", which has no such tensor");
    } catch (const io::IoError& e) {
      throw ModelCheckpointError(e.what());
    }
  } else {
    c.files = {c.weights};
  }
  for (const auto& f : c.files) {
    try {
      io::FileIndex ix = io::index_file(f);
      if (c.metadata.empty()) c.metadata = std::move(ix.metadata);
      for (auto& t : ix.tensors) c.tensors.push_back(std::move(t));
    } catch (const io::IoError& e) {
      throw ModelCheckpointError(e.what());
    }
  }
  for (const auto& t : c.tensors) {
    std::int64_t n = 1;
    for (auto x : t.shape) n *= x;
    c.parameters += n;
    c.bytes_by_dtype[t.stored_dtype] += n * stored_size(t.stored_dtype);
  }
}

/// The architecture each anchor tensor names, and the anchor.
constexpr std::pair<const char*, const char*> kAnchors[] = {
    {"gpt2", "wte.weight"}, {"bert", "embeddings.word_embeddings.weight"}, {"llama", "model.embed_tokens.weight"}};

/// Sets c.prefix (and, without a config, c.shape.arch) from the anchor tensor's name.
void find_prefix(ModelCheckpoint& c) {
  for (const auto& [arch, anchor] : kAnchors) {
    if (!c.shape.arch.empty() && c.shape.arch != arch) continue;
    const std::string a = anchor;
    for (const auto& t : c.tensors) {
      if (t.name.size() < a.size() || t.name.compare(t.name.size() - a.size(), a.size(), a) != 0) continue;
      const std::string pre = t.name.substr(0, t.name.size() - a.size());
      if (!pre.empty() && pre.back() != '.') continue;
      c.shape.arch = arch;
      c.prefix = pre;
      if (c.model_type.empty()) c.model_type = arch;
      return;
    }
    if (!c.shape.arch.empty())
      fail(c.weights, "no '" + a + "' tensor, which a " + c.shape.arch + " checkpoint (" + c.config + ") has");
  }
  fail(c.weights, "no tensor names a gpt2 ('wte.weight'), bert ('embeddings.word_embeddings.weight') or llama "
                  "('model.embed_tokens.weight') model");
}

/// The name stem of a layer's tensors and one tensor every layer has.
std::pair<std::string, std::string> layer_probe(const std::string& arch) {
  if (arch == "gpt2") return {"h.", "ln_1.weight"};
  if (arch == "bert") return {"encoder.layer.", "attention.self.query.weight"};
  return {"model.layers.", "input_layernorm.weight"};
}

/// Fills the shape parameters the config did not give from the tensors that fix them.
void shapes_from_tensors(ModelCheckpoint& c) {
  std::map<std::string, const io::TensorInfo*> by_name;
  for (const auto& t : c.tensors) by_name[t.name] = &t;
  auto dim = [&](const std::string& name, std::size_t axis) -> std::int64_t {
    auto it = by_name.find(c.prefix + name);
    if (it != by_name.end()) return it->second->shape.size() > axis ? it->second->shape[axis] : 0;
    // stored compressed: the format record ("... layout=nk n=N k=K") gives the logical shape
    const auto rec = c.metadata.find("ymlopt.format." + c.prefix + name);
    if (rec == c.metadata.end() || axis > 1) return 0;
    std::int64_t n = 0, k = 0;
    std::istringstream fields(rec->second);
    for (std::string f; fields >> f;) {
      if (f.rfind("n=", 0) == 0) n = std::atoll(f.c_str() + 2);
      if (f.rfind("k=", 0) == 0) k = std::atoll(f.c_str() + 2);
    }
    const bool kn = rec->second.find("layout=kn") != std::string::npos;
    return (axis == 0) != kn ? n : k;  // nk: [n, k]; kn: [k, n]
  };
  ArchConfig& s = c.shape;
  auto set = [](std::int64_t& field, std::int64_t v) {
    if (!field) field = v;
  };
  if (s.arch == "gpt2") {
    c.tied = true;  // GPT-2's LM head is the token embedding table
    set(s.vocab, dim("wte.weight", 0)), set(s.width, dim("wte.weight", 1)), set(s.context, dim("wpe.weight", 0));
    set(s.ffn, dim("h.0.mlp.c_fc.weight", 1));
  } else if (s.arch == "bert") {
    set(s.vocab, dim("embeddings.word_embeddings.weight", 0)), set(s.width, dim("embeddings.word_embeddings.weight", 1));
    set(s.context, dim("embeddings.position_embeddings.weight", 0));
    set(s.type_vocab, dim("embeddings.token_type_embeddings.weight", 0));
    set(s.ffn, dim("encoder.layer.0.intermediate.dense.weight", 0));
  } else {
    set(s.vocab, dim("model.embed_tokens.weight", 0)), set(s.width, dim("model.embed_tokens.weight", 1));
    set(s.ffn, dim("model.layers.0.mlp.gate_proj.weight", 0));
    if (c.config.empty())
      c.tied = !by_name.count(c.prefix + "lm_head.weight") && !by_name.count(c.prefix + "lm_head.weight.w");
  }
  const auto [stem, probe] = layer_probe(s.arch);
  if (!s.layers)
    while (by_name.count(c.prefix + stem + std::to_string(s.layers) + "." + probe)) ++s.layers;
  // heads are not in any tensor's shape; llama's kv heads follow from them
  if (s.arch == "llama" && s.heads && !s.kv_heads && s.width % s.heads == 0)
    if (const std::int64_t k = dim("model.layers.0.self_attn.k_proj.weight", 0); k % (s.width / s.heads) == 0)
      s.kv_heads = k / (s.width / s.heads);
  if (s.arch != "llama" && s.heads && !s.kv_heads) s.kv_heads = s.heads;
  const std::pair<const char*, std::int64_t> fields[] = {{"layers", s.layers}, {"width", s.width}, {"heads", s.heads},
                                                         {"ffn", s.ffn},       {"vocab", s.vocab}};
  for (const auto& [name, v] : fields)
    if (!v) c.undetermined.push_back(name);
  if (s.arch == "llama" && !s.kv_heads) c.undetermined.push_back("kv_heads");
  if (s.arch != "llama" && !s.context) c.undetermined.push_back("context");
  if (s.arch == "bert" && !s.type_vocab) s.type_vocab = 2;
}

/// Every tensor the architecture has at these shapes is there, with its shape.
void check_tensors(ModelCheckpoint& c) {
  const ArchConfig& s = c.shape;
  if (!c.undetermined.empty()) return;
  std::map<std::string, const io::TensorInfo*> by_name;
  for (const auto& t : c.tensors) by_name[t.name] = &t;
  // the last layer is there and the next is not, before listing every layer's tensors
  const auto [stem, probe] = layer_probe(s.arch);
  for (const std::int64_t l : {s.layers - 1, s.layers}) {
    const std::string name = c.prefix + stem + std::to_string(l) + "." + probe;
    if (by_name.count(name) != std::size_t(l < s.layers))
      fail(c.weights, (l < s.layers ? "no tensor '" + name + "': " : "a tensor '" + name + "': ") +
                          (c.config.empty() ? std::string("the weights give ") : c.config + " gives ") +
                          std::to_string(s.layers) + " layers");
  }
  const std::string from = c.config.empty() ? "the other tensors' shapes give" : c.config + " gives";
  for (const WeightSpec& w : weight_specs(s)) {
    const auto it = by_name.find(c.prefix + w.name);
    if (it == by_name.end() && by_name.count(c.prefix + w.name + ".w")) continue;  // stored compressed: the compiler checks it
    if (it == by_name.end()) {
      if (w.name.rfind("pooler.", 0) == 0 || (w.name == "lm_head.weight" && c.tied)) continue;
      fail(c.weights, "no tensor '" + c.prefix + w.name + "', which a " + s.arch + " of " + std::to_string(s.layers) +
                          " layers has" + (w.name == "lm_head.weight" ? " (unless tie_word_embeddings is true)" : ""));
    }
    c.dense_dtypes.insert(it->second->stored_dtype);
    if (it->second->shape != w.shape)
      fail(c.weights, "'" + it->first + "' is " + shape_str(it->second->shape) + " but " + from + " " +
                          shape_str(w.shape) + " (layers " + std::to_string(s.layers) + ", width " +
                          std::to_string(s.width) + ", heads " + std::to_string(s.heads) +
                          (s.arch == "llama" ? ", kv heads " + std::to_string(s.kv_heads) : std::string()) + ", ffn " +
                          std::to_string(s.ffn) + ", vocab " + std::to_string(s.vocab) + ")");
  }
}

/// The shortest text that reads back as v.
std::string number(double v) {
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

void make_params(ModelCheckpoint& c) {
  const ArchConfig& s = c.shape;
  auto& p = c.params;
  p = {{"weights", c.weights}, {"prefix", c.prefix}};
  auto put = [&](const char* name, std::int64_t v) {
    if (v) p.emplace_back(name, std::to_string(v));
  };
  put("layers", s.layers), put("width", s.width), put("heads", s.heads);
  if (s.arch == "llama") put("kv_heads", s.kv_heads);
  put("ffn", s.ffn), put("vocab", s.vocab);
  if (s.arch != "llama") put("context", s.context);
  if (s.arch == "bert") put("type_vocab", s.type_vocab);
  if (c.eps) p.emplace_back("eps", number(*c.eps));
  if (c.rope_theta) p.emplace_back("rope_theta", number(*c.rope_theta));
  if (c.window) p.emplace_back("window", std::to_string(c.window));
  if (s.arch == "llama")
    p.emplace_back("lm_head_key", c.prefix + (c.tied ? "model.embed_tokens.weight" : "lm_head.weight"));
}

}  // namespace

ModelCheckpoint read_checkpoint(const std::string& path) {
  ModelCheckpoint c;
  c.path = path;
  find_weights(path, c);
  if (!c.config.empty()) {
    std::ifstream in(c.config, std::ios::binary);
    if (!in) fail(c.config, "cannot open");
    std::ostringstream ss;
    ss << in.rdbuf();
    apply_config(c.config, ss.str(), c);
  }
  complete_checkpoint(c);
  return c;
}

/// What `ymlopt convert X.gguf` recorded of the hyper-parameters no tensor
/// shows (metadata ymlopt.hparams.*), for a file without config.json.
void hparams_from_metadata(ModelCheckpoint& c) {
  if (!c.config.empty()) return;
  auto num = [&](const char* key) -> std::optional<double> {
    const auto it = c.metadata.find(std::string("ymlopt.hparams.") + key);
    if (it == c.metadata.end()) return std::nullopt;
    char* end = nullptr;
    const double v = std::strtod(it->second.c_str(), &end);
    if (end == it->second.c_str() || *end || !(v > 0) || v > 1e12)
      fail(c.weights, "metadata ymlopt.hparams." + std::string(key) + " is '" + it->second + "', not a positive number");
    return v;
  };
  if (auto v = num("heads")) c.shape.heads = std::int64_t(*v);
  if (auto v = num("kv_heads")) c.shape.kv_heads = std::int64_t(*v);
  if (auto v = num("context")) c.shape.context = std::int64_t(*v);
  if (auto v = num("eps")) c.eps = *v;
  if (auto v = num("rope_theta"); v && c.shape.arch == "llama") c.rope_theta = *v;
}

void complete_checkpoint(ModelCheckpoint& c) {
  find_prefix(c);
  hparams_from_metadata(c);
  shapes_from_tensors(c);
  check_tensors(c);
  make_params(c);
}

std::int64_t convert_checkpoint_to_f32(const ModelCheckpoint& c, const std::string& out_dir) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) fail(out_dir, "cannot create: " + ec.message());
  if (fs::equivalent(out_dir, fs::path(c.weights).parent_path(), ec)) fail(out_dir, "is the checkpoint's own folder");
  // every tensor, from the file that holds it
  std::vector<std::unique_ptr<io::MappedTensorFile>> files;
  std::vector<std::pair<io::MappedTensorFile*, io::TensorInfo>> src;
  std::vector<io::TensorInfo> out;
  try {
    for (const auto& f : c.files) {
      files.push_back(std::make_unique<io::MappedTensorFile>(f));
      for (auto t : io::list_tensors(f)) {
        io::TensorInfo o = t;
        if (t.dtype == DType::f16 || t.dtype == DType::bf16) o.dtype = DType::f32, o.stored_dtype = "F32";
        if (!o.dtype) fail(f, "'" + t.name + "' has dtype " + t.stored_dtype + ", which ymlopt does not read");
        src.emplace_back(files.back().get(), std::move(t));
        out.push_back(std::move(o));
      }
    }
    const std::string target = (fs::path(out_dir) / "model.safetensors").string();
    io::save_safetensors_streamed(
        target, out,
        [&](std::size_t i, std::span<std::byte> bytes) {
          auto& [file, info] = src[i];
          const std::byte* p = file->tensor(info.name);
          if (info.dtype == out[i].dtype) {
            std::memcpy(bytes.data(), p, bytes.size());
            return;
          }
          const bool bf16 = info.dtype == DType::bf16;
          for (std::size_t k = 0; k < bytes.size() / 4; ++k) {
            std::uint16_t h;
            std::memcpy(&h, p + 2 * k, 2);
            const float v = bf16 ? half::bf16_bits_to_float(h) : float(half::f16_bits_to_double(h));
            std::memcpy(bytes.data() + 4 * k, &v, 4);
          }
        },
        [&] {  // the source's records (quantized weights' formats among them) stay true of the widened file
          std::map<std::string, std::string> meta = c.metadata;
          meta["format"] = "pt";
          meta["ymlopt.converted_from"] = c.weights;
          return meta;
        }());
    for (const char* name : {"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json",
                             "special_tokens_map.json"}) {
      const fs::path from = fs::path(c.weights).parent_path() / name;
      if (fs::exists(from)) fs::copy_file(from, fs::path(out_dir) / name, fs::copy_options::overwrite_existing);
    }
    return std::int64_t(fs::file_size(target));
  } catch (const io::IoError& e) {
    throw ModelCheckpointError(e.what());
  } catch (const fs::filesystem_error& e) {
    throw ModelCheckpointError(std::string(e.what()));
  }
}

PromptIds prompt_ids(const std::string& model_dir, const std::string& prompt, std::int64_t context) {
  const std::vector<std::int32_t> ids =
      text::HfTokenizer::from_file((fs::path(model_dir) / "tokenizer.json").string()).encode(prompt, true);
  if (ids.empty()) throw ModelCheckpointError("the text gives no tokens");
  if (context > 0 && std::int64_t(ids.size()) > context)
    throw ModelCheckpointError(std::to_string(ids.size()) + " tokens, longer than the model's context of " +
                               std::to_string(context));
  return save_prompt_ids(ids);
}

PromptIds save_prompt_ids(const std::vector<std::int32_t>& ids) {
  static const ScratchDir scratch("prompt");  // lives until the process exits
  static int serial = 0;
  PromptIds p{scratch.path() + "/ids-" + std::to_string(serial++) + ".npy", ids.size()};
  TensorView v;
  v.data = const_cast<std::int32_t*>(ids.data());
  v.dtype = DType::i32;
  v.rows = std::int64_t(ids.size());
  v.cols = 1;
  v.ld = 1;
  v.shape = {std::int64_t(ids.size())};
  io::save_npy(p.path, v);
  return p;
}

std::optional<std::vector<std::int64_t>> eos_token_ids(const std::string& file, const std::string& text) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::parse_error& e) {
    fail(file, line_column(text, e.byte ? e.byte - 1 : 0) + ": not valid JSON");
  } catch (const json::exception& e) {
    fail(file, std::string("not valid JSON: ") + json_reason(e));
  }
  if (!j.is_object() || !j.contains("eos_token_id") || j["eos_token_id"].is_null()) return std::nullopt;
  std::vector<std::int64_t> ids;
  const json& e = j["eos_token_id"];
  for (const json& v : e.is_array() ? e : json::array({e})) {
    if (!v.is_number_integer() || v.get<std::int64_t>() < 0 || v.get<std::int64_t>() > INT32_MAX)
      fail(file, "eos_token_id holds " + v.dump() + ": not a token id");
    ids.push_back(v.get<std::int64_t>());
  }
  return ids;
}

std::string describe(const ModelCheckpoint& c) {
  const ArchConfig& s = c.shape;
  std::ostringstream o;
  auto v = [](std::int64_t x) { return x ? std::to_string(x) : std::string("?"); };
  o << c.path << ": " << s.arch << " checkpoint";
  if (!c.config.empty()) o << " (" << c.config << ", model_type '" << c.model_type << "')";
  else o << " (no config.json: shapes from the tensors)";
  o << "\n  weights: " << c.weights;
  if (c.files.size() > 1) o << " (" << c.files.size() << " shards)";
  if (!c.prefix.empty()) o << ", tensor names under '" << c.prefix << "'";
  o << "\n  layers " << v(s.layers) << ", width " << v(s.width) << ", heads " << v(s.heads);
  if (s.arch == "llama") o << " (" << v(s.kv_heads) << " kv)";
  o << ", ffn " << v(s.ffn) << ", vocab " << v(s.vocab);
  if (s.arch != "llama" || s.context) o << ", context " << v(s.context);
  if (c.eps) o << ", eps " << number(*c.eps);
  if (c.rope_theta) o << ", rope_theta " << number(*c.rope_theta);
  if (c.window) o << ", sliding window " << c.window;
  if (s.arch != "bert") o << ", embeddings " << (c.tied ? "tied" : "untied") << " to the LM head";
  o << "\n  " << c.tensors.size() << " tensors, " << c.parameters << " parameters;";
  for (const auto& [dtype, bytes] : c.bytes_by_dtype) {
    char mib[32];
    std::snprintf(mib, sizeof mib, "%.1f", double(bytes) / (1 << 20));
    o << " " << dtype << " " << bytes << " bytes (" << mib << " MiB)";
  }
  o << "\n";
  if (!c.undetermined.empty()) {
    o << "  undetermined (no config.json gives them, no tensor shape fixes them):";
    for (const auto& u : c.undetermined) o << " " << u;
    o << "\n";
  }
  if (const fs::path tok = fs::path(c.weights).parent_path() / "tokenizer.json"; !c.config.empty() && fs::exists(tok))
    o << "  tokenizer: " << tok.string() << " (ymlopt tokenize --model " << c.path << ")\n";
  o << "  workflow parameters (--model):";
  for (const auto& [name, value] : c.params) o << " " << name << "=" << value;
  o << "\n";
  return o.str();
}

}  // namespace ymlopt
