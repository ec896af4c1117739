#include "gguf_model.hpp"

#include <charconv>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <ymlopt/half.hpp>

#include "io/gguf.hpp"
#include "io/tensor_file.hpp"

namespace ymlopt {
namespace {

namespace gg = io::gguf;

// How a tensor's layout differs between the two files.
enum class Fix {
  none,
  transpose,  // GPT-2 Conv1D [in, out] <-> [out, in]
  permute_q,  // LLaMA q/k rows: Hugging Face RoPE halves <-> llama.cpp pairs
  permute_k,
};

struct Map {
  std::string hf, gg;
  Fix fix = Fix::none;
  std::vector<std::uint64_t> ne;  // the GGUF dimensions the hyper-parameters imply (empty: not known)
};

// Every tensor of the architecture: (Hugging Face name, llama.cpp name, fix).
std::vector<Map> tensor_maps(const ArchConfig& c) {
  using Ne = std::vector<std::uint64_t>;
  const auto u = [](std::int64_t v) { return std::uint64_t(v); };
  const Ne wd = {u(c.width)}, sq = {u(c.width), u(c.width)}, up = {u(c.width), u(c.ffn)}, down = {u(c.ffn), u(c.width)};
  std::vector<Map> m;
  for (std::int64_t l = 0; l < c.layers; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    if (c.arch == "llama") {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      const Ne kv = {u(c.width), u(c.kv_heads * (c.width / c.heads))};
      m.push_back({p + "input_layernorm.weight", b + "attn_norm.weight", Fix::none, wd});
      m.push_back({p + "self_attn.q_proj.weight", b + "attn_q.weight", Fix::permute_q, sq});
      m.push_back({p + "self_attn.k_proj.weight", b + "attn_k.weight", Fix::permute_k, kv});
      m.push_back({p + "self_attn.v_proj.weight", b + "attn_v.weight", Fix::none, kv});
      m.push_back({p + "self_attn.o_proj.weight", b + "attn_output.weight", Fix::none, sq});
      m.push_back({p + "post_attention_layernorm.weight", b + "ffn_norm.weight", Fix::none, wd});
      m.push_back({p + "mlp.gate_proj.weight", b + "ffn_gate.weight", Fix::none, up});
      m.push_back({p + "mlp.up_proj.weight", b + "ffn_up.weight", Fix::none, up});
      m.push_back({p + "mlp.down_proj.weight", b + "ffn_down.weight", Fix::none, down});
    } else {
      const std::string p = "h." + std::to_string(l) + ".";
      struct Part {
        const char *h, *g;
        Ne weight;  // a norm's or linear's weight; its bias is weight's last dimension
      };
      const Part parts[] = {{"ln_1", "attn_norm", wd},          {"attn.c_attn", "attn_qkv", {u(c.width), u(3 * c.width)}},
                            {"attn.c_proj", "attn_output", sq}, {"ln_2", "ffn_norm", wd},
                            {"mlp.c_fc", "ffn_up", up},         {"mlp.c_proj", "ffn_down", down}};
      for (const auto& [h, g, ne] : parts) {
        const bool linear = std::strncmp(h, "ln", 2) != 0;
        m.push_back({p + h + ".weight", b + g + ".weight", linear ? Fix::transpose : Fix::none, ne});
        m.push_back({p + h + ".bias", b + g + ".bias", Fix::none, {ne.back()}});
      }
    }
  }
  const Ne table = {u(c.width), u(c.vocab)};
  if (c.arch == "llama") {
    m.push_back({"model.embed_tokens.weight", "token_embd.weight", Fix::none, table});
    m.push_back({"model.norm.weight", "output_norm.weight", Fix::none, wd});
    m.push_back({"lm_head.weight", "output.weight", Fix::none, table});
  } else {
    m.push_back({"wte.weight", "token_embd.weight", Fix::none, table});
    m.push_back({"wpe.weight", "position_embd.weight", Fix::none, c.context ? Ne{u(c.width), u(c.context)} : Ne{}});
    m.push_back({"ln_f.weight", "output_norm.weight", Fix::none, wd});
    m.push_back({"ln_f.bias", "output_norm.bias", Fix::none, wd});
  }
  return m;
}

// The source row of output row r when the rows of `heads` heads are permuted
// (to_gguf: Hugging Face halves -> llama.cpp pairs; else back).
std::int64_t permuted_row(std::int64_t r, std::int64_t rows, std::int64_t heads, bool to_gguf) {
  const std::int64_t dh = rows / heads, half = dh / 2, h = r / dh, w = r % dh;
  return to_gguf ? h * dh + (w % 2) * half + w / 2 : h * dh + 2 * (w % half) + w / half;
}

// llama.cpp's block types for ymlopt's q8_0 / q4_0 records ("int8 group=32 ..."
// with f16 scales and no zero points); nullopt for any other format.
std::optional<gg::Type> ggml_block_type(const std::map<std::string, std::string>& fmt, bool has_zero, DType scale) {
  auto get = [&](const char* k) { auto it = fmt.find(k); return it == fmt.end() ? std::string() : it->second; };
  if (get("group") != "32" || get("block") != "0" || has_zero || scale != DType::f16) return std::nullopt;
  if (get("format") == "int8") return gg::Type::q8_0;
  if (get("format") == "int4") return gg::Type::q4_0;
  return std::nullopt;
}

std::map<std::string, std::string> parse_format(const std::string& record) {
  std::map<std::string, std::string> kv;
  std::istringstream words(record);
  std::string w;
  words >> kv["format"];
  while (words >> w)
    if (auto eq = w.find('='); eq != std::string::npos) kv[w.substr(0, eq)] = w.substr(eq + 1);
  return kv;
}

// Q8_0 / Q4_0 rows from codes [n, k] (int4: two per byte, element 2j low) and
// f16 scales [n, k/32], or back; `row_of(r)` is the source row of row r.
template <class RowOf>
void blocks_from_codes(gg::Type t, const std::byte* q, const std::byte* s, std::int64_t n, std::int64_t k, RowOf row_of,
                       std::byte* out) {
  const std::int64_t nb = k / 32, qrow = t == gg::Type::q8_0 ? k : k / 2, bb = t == gg::Type::q8_0 ? 34 : 18;
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t src = row_of(r);
    const auto* qr = reinterpret_cast<const std::uint8_t*>(q) + src * qrow;
    for (std::int64_t b = 0; b < nb; ++b) {
      std::byte* blk = out + (r * nb + b) * bb;
      std::memcpy(blk, s + (src * nb + b) * 2, 2);
      auto* qs = reinterpret_cast<std::uint8_t*>(blk + 2);
      if (t == gg::Type::q8_0) {
        std::memcpy(qs, qr + b * 32, 32);
        continue;
      }
      auto code = [&](std::int64_t e) { return (qr[e / 2] >> ((e & 1) * 4)) & 0xF; };
      for (int j = 0; j < 16; ++j) qs[j] = std::uint8_t(code(b * 32 + j) | code(b * 32 + j + 16) << 4);
    }
  }
}

template <class RowOf>
void codes_from_blocks(gg::Type t, const std::byte* in, std::int64_t n, std::int64_t k, RowOf row_of, std::byte* q,
                       std::byte* s) {
  const std::int64_t nb = k / 32, qrow = t == gg::Type::q8_0 ? k : k / 2, bb = t == gg::Type::q8_0 ? 34 : 18;
  for (std::int64_t r = 0; r < n; ++r) {
    const std::int64_t src = row_of(r);
    auto* qr = reinterpret_cast<std::uint8_t*>(q) + r * qrow;
    for (std::int64_t b = 0; b < nb; ++b) {
      const std::byte* blk = in + (src * nb + b) * bb;
      std::memcpy(s + (r * nb + b) * 2, blk, 2);
      const auto* qs = reinterpret_cast<const std::uint8_t*>(blk + 2);
      if (t == gg::Type::q8_0) {
        std::memcpy(qr + b * 32, qs, 32);
        continue;
      }
      for (int j = 0; j < 16; ++j) {
        const std::int64_t lo = b * 32 + j, hi = lo + 16;
        qr[lo / 2] = std::uint8_t((qr[lo / 2] & (lo & 1 ? 0x0F : 0xF0)) | (qs[j] & 0xF) << ((lo & 1) * 4));
        qr[hi / 2] = std::uint8_t((qr[hi / 2] & (hi & 1 ? 0x0F : 0xF0)) | (qs[j] >> 4) << ((hi & 1) * 4));
      }
    }
  }
}

// Dense rows of `es` bytes per element: out row r of a [rows, cols] result,
// fixed (transposed from [cols, rows], or its rows permuted).
void dense_fixed(const std::byte* in, std::byte* out, std::int64_t rows, std::int64_t cols, std::size_t es, Fix fix,
                 std::int64_t heads, bool to_gguf) {
  for (std::int64_t r = 0; r < rows; ++r) {
    if (fix == Fix::transpose) {
      for (std::int64_t c = 0; c < cols; ++c) std::memcpy(out + (r * cols + c) * es, in + (c * rows + r) * es, es);
      continue;
    }
    const std::int64_t src = fix == Fix::none ? r : permuted_row(r, rows, heads, to_gguf);
    std::memcpy(out + r * cols * es, in + src * cols * es, cols * es);
  }
}

std::int64_t heads_of(Fix fix, const ArchConfig& c) { return fix == Fix::permute_k ? c.kv_heads : c.heads; }

gg::Type ggml_dense_type(DType t) {
  switch (t) {
    case DType::f32: return gg::Type::f32;
    case DType::f16: return gg::Type::f16;
    case DType::bf16: return gg::Type::bf16;
    default: throw std::runtime_error(std::string("a ") + dtype_name(t) + " tensor has no GGUF counterpart here");
  }
}

// A placeholder vocabulary (the checkpoint has no tokenizer): GPT-2's 256
// byte-level symbols or llama's byte-fallback tokens, then numbered fillers,
// so that llama.cpp loads the file and runs token ids.
void placeholder_vocab(const ArchConfig& c, gg::KeyValues& kv) {
  std::vector<std::string> tokens;
  std::vector<std::int32_t> types;
  auto add = [&](std::string t, std::int32_t type) {
    tokens.push_back(std::move(t));
    types.push_back(type);
  };
  if (c.arch == "gpt2") {
    if (c.vocab < 257) throw std::runtime_error("a GPT-2 vocabulary needs at least 257 tokens, the model has " + std::to_string(c.vocab));
    for (int b = 0; b < 256; ++b) {  // GPT-2's bytes_to_unicode: printable bytes stand for themselves
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
      int n = 0;
      for (int x = 0; x < b; ++x) n += !((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE);
      const unsigned cp = printable ? unsigned(b) : 256u + unsigned(n);
      std::string u = cp < 0x80 ? std::string(1, char(cp)) : std::string{char(0xC0 | (cp >> 6)), char(0x80 | (cp & 0x3F))};
      add(u, 1);
    }
    for (std::int64_t i = 256; i + 1 < c.vocab; ++i) add("<t" + std::to_string(i) + ">", 1);
    add("<|endoftext|>", 3);
    kv.emplace_back("tokenizer.ggml.model", gg::Value::str("gpt2"));
    kv.emplace_back("tokenizer.ggml.pre", gg::Value::str("gpt-2"));
    kv.emplace_back("tokenizer.ggml.tokens", gg::Value::strings_of(tokens));
    kv.emplace_back("tokenizer.ggml.token_type", gg::Value::i32s(types));
    kv.emplace_back("tokenizer.ggml.merges", gg::Value::strings_of({}));
    kv.emplace_back("tokenizer.ggml.bos_token_id", gg::Value::u32(std::uint32_t(c.vocab - 1)));
    kv.emplace_back("tokenizer.ggml.eos_token_id", gg::Value::u32(std::uint32_t(c.vocab - 1)));
    return;
  }
  if (c.vocab < 259) throw std::runtime_error("a llama vocabulary needs at least 259 tokens, the model has " + std::to_string(c.vocab));
  add("<unk>", 2);
  add("<s>", 3);
  add("</s>", 3);
  for (int b = 0; b < 256; ++b) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "<0x%02X>", b);
    add(hex, 6);
  }
  for (std::int64_t i = 259; i < c.vocab; ++i) add("\xE2\x96\x81t" + std::to_string(i), 1);  // "▁t<i>"
  std::vector<float> scores(tokens.size());
  for (std::size_t i = 0; i < scores.size(); ++i) scores[i] = types[i] == 1 ? -float(i) : 0.0f;
  kv.emplace_back("tokenizer.ggml.model", gg::Value::str("llama"));
  kv.emplace_back("tokenizer.ggml.tokens", gg::Value::strings_of(tokens));
  kv.emplace_back("tokenizer.ggml.scores", gg::Value::f32s(scores));
  kv.emplace_back("tokenizer.ggml.token_type", gg::Value::i32s(types));
  kv.emplace_back("tokenizer.ggml.unknown_token_id", gg::Value::u32(0));
  kv.emplace_back("tokenizer.ggml.bos_token_id", gg::Value::u32(1));
  kv.emplace_back("tokenizer.ggml.eos_token_id", gg::Value::u32(2));
}

// The architecture's hyper-parameters as llama.cpp's keys.
gg::KeyValues hparams(const GgufExport& e) {
  const ArchConfig& c = e.cfg;
  const std::string a = c.arch + ".";
  gg::KeyValues kv = {{"general.architecture", gg::Value::str(c.arch)},
                      {"general.name", gg::Value::str(e.name)},
                      {a + "context_length", gg::Value::u32(std::uint32_t(c.context))},
                      {a + "embedding_length", gg::Value::u32(std::uint32_t(c.width))},
                      {a + "block_count", gg::Value::u32(std::uint32_t(c.layers))},
                      {a + "feed_forward_length", gg::Value::u32(std::uint32_t(c.ffn))},
                      {a + "attention.head_count", gg::Value::u32(std::uint32_t(c.heads))}};
  if (c.arch == "llama") {
    kv.emplace_back(a + "attention.head_count_kv", gg::Value::u32(std::uint32_t(c.kv_heads)));
    kv.emplace_back(a + "attention.layer_norm_rms_epsilon", gg::Value::f32(float(e.eps)));
    kv.emplace_back(a + "rope.freq_base", gg::Value::f32(float(e.rope_theta)));
    kv.emplace_back(a + "rope.dimension_count", gg::Value::u32(std::uint32_t(c.width / c.heads)));
    kv.emplace_back(a + "vocab_size", gg::Value::u32(std::uint32_t(c.vocab)));
  } else {
    kv.emplace_back(a + "attention.layer_norm_epsilon", gg::Value::f32(float(e.eps)));
  }
  return kv;
}

}  // namespace

std::string infer_arch(const std::string& st_path) {
  for (const io::TensorInfo& t : io::list_tensors(st_path)) {
    if (t.name.rfind("model.layers.", 0) == 0 || t.name == "model.embed_tokens.weight") return "llama";
    if (t.name.rfind("h.", 0) == 0 || t.name == "wte.weight") return "gpt2";
  }
  return "";
}

}  // namespace ymlopt

namespace ymlopt {
namespace {

// A weight in a ymlopt safetensors file: dense, or compressed (record + companions).
struct Source {
  const io::TensorInfo* dense = nullptr;
  std::map<std::string, std::string> format;  // the ymlopt.format record, parsed
  const io::TensorInfo* codes = nullptr;
  const io::TensorInfo* scale = nullptr;
  bool zero = false;
};

class Checkpoint {
 public:
  explicit Checkpoint(const std::string& path)
      : path_(path), infos_(io::list_tensors(path)), meta_(io::read_metadata(path)), file_(path) {
    for (const io::TensorInfo& t : infos_) by_name_[t.name] = &t;
  }
  std::optional<Source> find(const std::string& key) const {
    Source s;
    if (auto it = by_name_.find(key); it != by_name_.end()) {
      s.dense = it->second;
      return s;
    }
    auto rec = meta_.find("ymlopt.format." + key);
    if (rec == meta_.end()) return std::nullopt;
    s.format = parse_format(rec->second);
    s.codes = info(key + ".w");
    s.scale = info(key + ".w_scale");
    s.zero = info(key + ".w_zero") != nullptr;
    if (!s.codes || !s.scale) throw io::IoError(path_ + ": '" + key + "' has no companion '" + key + ".w' or '.w_scale'");
    return s;
  }
  // The weight's shape as the model uses it ([n, k] or [k, n]: the record's layout).
  std::vector<std::int64_t> shape(const std::string& key) const {
    const auto s = find(key);
    if (!s) return {};
    if (s->dense) return s->dense->shape;
    const std::int64_t n = std::stoll(s->format.at("n")), k = std::stoll(s->format.at("k"));
    return s->format.at("layout") == "nk" ? std::vector<std::int64_t>{n, k} : std::vector<std::int64_t>{k, n};
  }
  const std::byte* bytes(const io::TensorInfo& t) const { return file_.tensor(t.name); }
  const std::vector<io::TensorInfo>& infos() const { return infos_; }
  const std::string& path() const { return path_; }
  // a hyper-parameter recorded by import_gguf ("" if none)
  std::string hparam(const std::string& name) const {
    auto it = meta_.find("ymlopt.hparams." + name);
    return it == meta_.end() ? "" : it->second;
  }

 private:
  const io::TensorInfo* info(const std::string& name) const {
    auto it = by_name_.find(name);
    return it == by_name_.end() ? nullptr : it->second;
  }
  std::string path_;
  std::vector<io::TensorInfo> infos_;
  std::map<std::string, std::string> meta_;
  io::MappedTensorFile file_;
  std::map<std::string, const io::TensorInfo*> by_name_;
};

// cfg's unset fields from the checkpoint's tensors; throws naming what is missing.
void complete_config(const Checkpoint& ck, GgufExport& e, std::vector<std::string>& notes) {
  ArchConfig& c = e.cfg;
  // what import_gguf recorded, where the caller left a field unset
  auto recorded = [&](const char* name, auto& field) {
    const std::string v = ck.hparam(name);
    if (!v.empty() && field == 0) field = static_cast<std::remove_reference_t<decltype(field)>>(std::stod(v));
  };
  recorded("heads", c.heads);
  recorded("kv_heads", c.kv_heads);
  recorded("context", c.context);
  recorded("eps", e.eps);
  if (e.name.empty()) e.name = ck.hparam("name");
  recorded("rope_theta", e.rope_theta);
  if (e.rope_theta == 0) e.rope_theta = 10000;
  const bool llama = c.arch == "llama";
  const std::string prefix = llama ? "model.layers." : "h.";
  std::int64_t layers = 0;
  for (const io::TensorInfo& t : ck.infos())
    if (t.name.rfind(prefix, 0) == 0) layers = std::max<std::int64_t>(layers, std::stoll(t.name.substr(prefix.size())) + 1);
  const auto emb = ck.shape(llama ? "model.embed_tokens.weight" : "wte.weight");
  if (emb.size() != 2) throw io::IoError(ck.path() + ": no token embedding table");
  if (!c.layers) c.layers = layers;
  if (!c.vocab) c.vocab = emb[0];
  if (!c.width) c.width = emb[1];
  if (!c.ffn) {
    const auto f = ck.shape(llama ? "model.layers.0.mlp.gate_proj.weight" : "h.0.mlp.c_fc.weight");
    if (f.size() == 2) c.ffn = llama ? f[0] : f[1];
  }
  if (!c.context && !llama) c.context = ck.shape("wpe.weight").empty() ? 0 : ck.shape("wpe.weight")[0];
  if (!c.context) {
    c.context = 2048;
    notes.push_back("context length not given: 2048 written (--context N)");
  }
  if (c.heads <= 0) throw std::invalid_argument("the head count is not in the checkpoint: give --heads N (or --preset)");
  if (c.width % c.heads != 0) throw std::invalid_argument("width " + std::to_string(c.width) + " is not a multiple of --heads " + std::to_string(c.heads));
  if (llama && !c.kv_heads) {
    const auto k = ck.shape("model.layers.0.self_attn.k_proj.weight");
    c.kv_heads = k.size() == 2 ? k[0] / (c.width / c.heads) : c.heads;
  }
  if (!llama) c.kv_heads = c.heads;
  if (e.eps == 0) e.eps = llama ? 1e-6 : 1e-5;  // workflows/models/*.xml's defaults
}

using Fill = std::function<void(std::span<std::byte>)>;

// The GGUF tensor and its bytes for one mapped weight.
std::pair<gg::TensorOut, Fill> export_tensor(const Checkpoint& ck, const Map& m, const Source& s, const GgufExport& e) {
  const std::int64_t heads = heads_of(m.fix, e.cfg);
  if (!s.dense) {
    const auto type = ggml_block_type(s.format, s.zero, s.scale->dtype.value_or(DType::f32));
    if (!type)
      throw std::runtime_error("'" + m.hf + "' is stored " + s.format.at("format") + " group=" + (s.format.count("group") ? s.format.at("group") : "?") +
                               ": not one of llama.cpp's block formats (quant.q8_0 and quant.q4_0 are)");
    const std::int64_t n = std::stoll(s.format.at("n")), k = std::stoll(s.format.at("k"));
    const std::byte *q = ck.bytes(*s.codes), *sc = ck.bytes(*s.scale);
    const Fix fix = m.fix;
    Fill fill = [=](std::span<std::byte> out) {
      blocks_from_codes(*type, q, sc, n, k, [&](std::int64_t r) {
        return fix == Fix::permute_q || fix == Fix::permute_k ? permuted_row(r, n, heads, true) : r;
      }, out.data());
    };
    return {{m.gg, std::uint32_t(*type), {std::uint64_t(k), std::uint64_t(n)}}, fill};
  }
  const io::TensorInfo& t = *s.dense;
  if (!t.dtype) throw std::runtime_error("'" + m.hf + "' is stored " + t.stored_dtype + ", which has no GGUF type here");
  const DType dt = *t.dtype;
  const gg::Type src_type = ggml_dense_type(dt);
  const std::byte* in = ck.bytes(t);
  if (t.shape.size() == 1)
    return {{m.gg, std::uint32_t(src_type), {std::uint64_t(t.shape[0])}},
            [=](std::span<std::byte> out) { std::memcpy(out.data(), in, out.size()); }};
  if (t.shape.size() != 2) throw std::runtime_error("'" + m.hf + "' is not a matrix");
  const bool tr = m.fix == Fix::transpose;
  const std::int64_t rows = tr ? t.shape[1] : t.shape[0], cols = tr ? t.shape[0] : t.shape[1];
  const bool to_f16 = e.f16 && dt == DType::f32;
  const Fix fix = m.fix;
  Fill fill = [=](std::span<std::byte> out) {
    if (!to_f16) return dense_fixed(in, out.data(), rows, cols, dtype_size(dt), fix, heads, true);
    std::vector<std::byte> f32(std::size_t(rows * cols) * 4);
    dense_fixed(in, f32.data(), rows, cols, 4, fix, heads, true);
    const auto* v = reinterpret_cast<const float*>(f32.data());
    auto* h = reinterpret_cast<std::uint16_t*>(out.data());
    for (std::int64_t i = 0; i < rows * cols; ++i) h[i] = half::f16_bits_from_double(v[i]);
  };
  return {{m.gg, std::uint32_t(to_f16 ? gg::Type::f16 : src_type), {std::uint64_t(cols), std::uint64_t(rows)}}, fill};
}

}  // namespace

std::vector<std::string> export_gguf(const std::string& st_path, const std::string& out, GgufExport e) {
  std::vector<std::string> notes;
  const Checkpoint ck(st_path);
  if (e.cfg.arch.empty()) e.cfg.arch = infer_arch(st_path);
  if (e.cfg.arch != "llama" && e.cfg.arch != "gpt2")
    throw std::invalid_argument(st_path + ": not a llama or GPT-2 checkpoint by its tensor names (--arch llama|gpt2)");
  complete_config(ck, e, notes);
  if (e.name.empty()) e.name = std::filesystem::path(st_path).stem().string();
  std::vector<gg::TensorOut> tensors;
  std::vector<Fill> fills;
  std::map<std::string, int> counts;
  std::uint32_t file_type = 0;  // llama.cpp's LLAMA_FTYPE: ALL_F32, MOSTLY_F16 1, MOSTLY_Q4_0 2, MOSTLY_Q8_0 7
  for (const Map& m : tensor_maps(e.cfg)) {
    const auto s = ck.find(m.hf);
    if (!s) {
      if (m.gg == "output.weight") {
        notes.push_back("no lm_head.weight: the output is tied to token_embd.weight");
        continue;
      }
      throw io::IoError(st_path + ": no tensor '" + m.hf + "' (a " + e.cfg.arch + " model of " +
                        std::to_string(e.cfg.layers) + " layers has one)");
    }
    auto [t, fill] = export_tensor(ck, m, *s, e);
    const auto type = gg::Type(t.type);
    if (t.ne.size() == 2) {
      if (type == gg::Type::q4_0) file_type = 2;
      else if (type == gg::Type::q8_0 && file_type != 2) file_type = 7;
      else if ((type == gg::Type::f16 || type == gg::Type::bf16) && file_type == 0) file_type = 1;
    }
    ++counts[gg::type_name(t.type)];
    tensors.push_back(std::move(t));
    fills.push_back(std::move(fill));
  }
  gg::KeyValues kv = hparams(e);
  kv.emplace_back("general.file_type", gg::Value::u32(file_type));
  if (file_type == 2 || file_type == 7) kv.emplace_back("general.quantization_version", gg::Value::u32(2));
  placeholder_vocab(e.cfg, kv);
  notes.push_back("no tokenizer in the checkpoint: a placeholder vocabulary of " + std::to_string(e.cfg.vocab) +
                  " tokens (byte symbols and numbered fillers); token ids run in llama.cpp, text is not the model's");
  gg::write(out, kv, tensors, [&](std::size_t i, std::span<std::byte> b) { fills[i](b); });
  std::string types;
  for (const auto& [name, n] : counts) types += (types.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  notes.insert(notes.begin(), std::to_string(tensors.size()) + " tensors (" + types + ")");
  return notes;
}

}  // namespace ymlopt

namespace ymlopt {
namespace {

std::optional<DType> dense_dtype(std::uint32_t t) {
  switch (gg::Type(t)) {
    case gg::Type::f32: return DType::f32;
    case gg::Type::f16: return DType::f16;
    case gg::Type::bf16: return DType::bf16;
    default: return std::nullopt;
  }
}

// The tensors (and format records) of one GGUF tensor in ymlopt's file.
struct Written {
  std::vector<io::TensorInfo> infos;
  std::vector<Fill> fills;
  std::map<std::string, std::string> meta;
};

void import_tensor(const gg::File& f, const gg::TensorInfo& t, const Map& m, const std::string& hf_key,
                   const ArchConfig& c, Written& w) {
  const std::byte* in = f.data(t).data();
  const std::int64_t heads = heads_of(m.fix, c);
  auto info = [](std::string name, DType dt, std::vector<std::int64_t> shape) {
    io::TensorInfo i;
    i.name = std::move(name);
    i.dtype = dt;
    i.shape = std::move(shape);
    return i;
  };
  if (t.ne.size() == 1) {
    const auto dt = dense_dtype(t.type);
    if (!dt) throw io::IoError(f.path + ": tensor '" + t.name + "' is " + gg::type_name(t.type) + " (1-D: F32, F16 or BF16)");
    w.infos.push_back(info(hf_key, *dt, {std::int64_t(t.ne[0])}));
    w.fills.push_back([in](std::span<std::byte> out) { std::memcpy(out.data(), in, out.size()); });
    return;
  }
  if (t.ne.size() != 2) throw io::IoError(f.path + ": tensor '" + t.name + "' has " + std::to_string(t.ne.size()) + " dimensions (2 expected)");
  const std::int64_t rows = std::int64_t(t.ne[1]), cols = std::int64_t(t.ne[0]);
  const Fix fix = m.fix;
  if (const auto dt = dense_dtype(t.type)) {
    const bool tr = fix == Fix::transpose;
    w.infos.push_back(info(hf_key, *dt, tr ? std::vector<std::int64_t>{cols, rows} : std::vector<std::int64_t>{rows, cols}));
    const std::size_t es = dtype_size(*dt);
    w.fills.push_back([=](std::span<std::byte> out) {
      dense_fixed(in, out.data(), tr ? cols : rows, tr ? rows : cols, es, fix, heads, false);
    });
    return;
  }
  const auto type = gg::Type(t.type);
  if (type != gg::Type::q8_0 && type != gg::Type::q4_0)
    throw io::IoError(f.path + ": tensor '" + t.name + "' is " + gg::type_name(t.type) +
                      ": ymlopt reads F32, F16, BF16, Q8_0 and Q4_0 (re-quantize the model to one of those)");
  const bool q8 = type == gg::Type::q8_0;
  // codes [n, k] (int4: [n, k/2]) and scales [n, k/32], written together from one pass over the blocks
  auto codes = std::make_shared<std::vector<std::byte>>();
  auto scales = std::make_shared<std::vector<std::byte>>();
  auto decode = [=]() {
    if (!codes->empty()) return;
    codes->resize(std::size_t(rows * (q8 ? cols : cols / 2)));
    scales->resize(std::size_t(rows * (cols / 32) * 2));
    codes_from_blocks(type, in, rows, cols, [&](std::int64_t r) {
      return fix == Fix::permute_q || fix == Fix::permute_k ? permuted_row(r, rows, heads, false) : r;
    }, codes->data(), scales->data());
  };
  w.infos.push_back(info(hf_key + ".w", DType::i8, {rows, q8 ? cols : cols / 2}));
  // (a zero-sized tensor leaves the vectors without storage: nothing to copy)
  w.fills.push_back([=](std::span<std::byte> out) {
    decode();
    if (!out.empty()) std::memcpy(out.data(), codes->data(), out.size());
  });
  w.infos.push_back(info(hf_key + ".w_scale", DType::f16, {rows, cols / 32}));
  w.fills.push_back([=](std::span<std::byte> out) {
    decode();
    if (!out.empty()) std::memcpy(out.data(), scales->data(), out.size());
    codes->clear();
    codes->shrink_to_fit();
  });
  w.meta["ymlopt.format." + hf_key] = std::string(q8 ? "int8" : "int4") + " group=32 block=0 layout=" +
                                      (fix == Fix::transpose ? "kn" : "nk") + " n=" + std::to_string(rows) +
                                      " k=" + std::to_string(cols);
}

// The architecture and hyper-parameters of a GGUF file.
GgufImport read_config(const gg::File& f) {
  GgufImport g;
  ArchConfig& c = g.cfg;
  const gg::Value* a = f.find("general.architecture");
  if (!a) throw io::IoError(f.path + ": no general.architecture");
  c.arch = a->text("general.architecture");
  if (c.arch != "llama" && c.arch != "gpt2")
    throw io::IoError(f.path + ": architecture '" + c.arch + "' is not one ymlopt's workflows run (llama, gpt2)");
  auto num = [&](const std::string& key, std::optional<double> fallback = std::nullopt) {
    const gg::Value* v = f.find(c.arch + "." + key);
    if (!v && fallback) return *fallback;
    if (!v) throw io::IoError(f.path + ": no " + c.arch + "." + key);
    return v->number(c.arch + "." + key);
  };
  c.layers = std::int64_t(num("block_count"));
  c.width = std::int64_t(num("embedding_length"));
  c.heads = std::int64_t(num("attention.head_count"));
  c.kv_heads = std::int64_t(num("attention.head_count_kv", double(c.heads)));
  c.ffn = std::int64_t(num("feed_forward_length"));
  c.context = std::int64_t(num("context_length", 0.0));
  const bool llama = c.arch == "llama";
  g.eps = num(llama ? "attention.layer_norm_rms_epsilon" : "attention.layer_norm_epsilon", llama ? 1e-6 : 1e-5);
  g.rope_theta = llama ? num("rope.freq_base", 10000.0) : 0;
  const gg::TensorInfo* emb = f.tensor("token_embd.weight");
  if (!emb || emb->ne.size() != 2) throw io::IoError(f.path + ": no 2-D token_embd.weight");
  c.vocab = std::int64_t(emb->ne[1]);
  if (c.layers <= 0 || c.heads <= 0 || c.kv_heads <= 0 || c.ffn <= 0 || c.vocab <= 0 || c.width % c.heads != 0 ||
      c.heads % c.kv_heads != 0 ||
      std::int64_t(emb->ne[0]) != c.width)
    throw io::IoError(f.path + ": inconsistent hyper-parameters (layers " + std::to_string(c.layers) + ", width " +
                      std::to_string(c.width) + ", heads " + std::to_string(c.heads) + "/" + std::to_string(c.kv_heads) +
                      ", token_embd " + std::to_string(emb->ne[0]) + " wide)");
  // every layer has tensors of its own: a block_count past the tensor count is a lie
  // (and would have the importer list billions of expected names)
  if (c.layers > std::int64_t(f.tensors.size()))
    throw io::IoError(f.path + ": " + c.arch + ".block_count is " + std::to_string(c.layers) + " but the file holds " +
                      std::to_string(f.tensors.size()) + " tensors");
  return g;
}

}  // namespace

std::string GgufImport::run_flags() const {
  std::string s = "--set layers=" + std::to_string(cfg.layers) + " --set width=" + std::to_string(cfg.width) +
                  " --set heads=" + std::to_string(cfg.heads);
  if (cfg.arch == "llama") s += " --set kv_heads=" + std::to_string(cfg.kv_heads);
  s += " --set ffn=" + std::to_string(cfg.ffn) + " --set vocab=" + std::to_string(cfg.vocab);
  if (cfg.arch == "gpt2" && cfg.context) s += " --set context=" + std::to_string(cfg.context);
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", eps);
  s += std::string(" --set eps=") + buf;
  if (cfg.arch == "llama") {
    std::snprintf(buf, sizeof buf, "%.9g", rope_theta);
    s += std::string(" --set rope_theta=") + buf;
  }
  return s;
}

GgufImport import_gguf(const std::string& gguf_path, const std::string& out) {
  const gg::File f = gg::read(gguf_path);
  GgufImport g = read_config(f);
  std::map<std::string, const Map*> by_gg;
  const std::vector<Map> maps = tensor_maps(g.cfg);
  for (const Map& m : maps) by_gg[m.gg] = &m;
  Written w;
  for (const gg::TensorInfo& t : f.tensors) {
    auto it = by_gg.find(t.name);
    if (it == by_gg.end())
      throw io::IoError(gguf_path + ": tensor '" + t.name + "' is not part of a " + g.cfg.arch + " model of " +
                        std::to_string(g.cfg.layers) + " layers as ymlopt's workflow runs it");
    const Map& m = *it->second;
    if (!m.ne.empty() && t.ne != m.ne) {  // the hyper-parameters say otherwise: a lying or mixed file
      auto dims = [](const std::vector<std::uint64_t>& ne) {
        std::string d;
        for (auto x : ne) d += (d.empty() ? "[" : ", ") + std::to_string(x);
        return d + "]";
      };
      throw io::IoError(gguf_path + ": tensor '" + t.name + "' is " + dims(t.ne) + " but the hyper-parameters (width " +
                        std::to_string(g.cfg.width) + ", ffn " + std::to_string(g.cfg.ffn) + ", vocab " +
                        std::to_string(g.cfg.vocab) + ") make it " + dims(m.ne));
    }
    import_tensor(f, t, m, m.hf, g.cfg, w);
  }
  for (const Map& m : maps) {
    if (f.tensor(m.gg)) continue;
    if (m.gg != "output.weight") throw io::IoError(gguf_path + ": no tensor '" + m.gg + "'");
    import_tensor(f, *f.tensor("token_embd.weight"), m, m.hf, g.cfg, w);  // tied: lm_head gets the table's copy
    g.notes.push_back("output.weight tied to token_embd.weight: lm_head.weight is a copy");
  }
  // the hyper-parameters the tensors do not give, for `ymlopt export` to write back
  auto rec = [&](const char* name, double v) {  // GGUF holds them as f32: the shortest text of that f32 (1e-05)
    char buf[32];
    const auto r = std::to_chars(buf, buf + sizeof buf, float(v));
    w.meta[std::string("ymlopt.hparams.") + name] = std::string(buf, r.ptr);
  };
  rec("heads", double(g.cfg.heads));
  rec("kv_heads", double(g.cfg.kv_heads));
  rec("context", double(g.cfg.context));
  rec("eps", g.eps);
  if (g.cfg.arch == "llama") rec("rope_theta", g.rope_theta);
  if (const gg::Value* n = f.find("general.name"); n && !n->is_array() && n->elem == gg::ValueType::string)
    w.meta["ymlopt.hparams.name"] = n->strings[0];
  io::save_safetensors_streamed(out, w.infos, [&](std::size_t i, std::span<std::byte> b) { w.fills[i](b); }, w.meta);
  return g;
}

}  // namespace ymlopt
