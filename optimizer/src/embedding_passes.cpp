// quant.embedding (see embedding_passes.hpp). Each table nn.embedding reads is
// quantized as W = table [n = vocab, k = d] by the same registered component a
// workflow would run (quant.int8: per-row symmetric int8; quant.group: int8/int4
// per group of d), and the readers are rebound by ModelEditor::replace_embedding:
// nn.embedding gathers from the codes (format int8/int4), and a tied nn.linear
// with transpose_w=true (GPT-2's lm_head on wte) reads the same codes through its
// w/w_scale/w_zero ports, whose layout is identical. A table tied to any other
// reader (or to a linear that reads it as [k, n]) is left alone and listed under
// "skipped" in the pass log with the reason. hot_rows=H (bits=4) keeps the first H
// rows apart in int8 (companions w_hot, w_hot_scale; nn.embedding reads them for ids
// below H), for tokenizers whose low ids are the frequent pieces; tied tables are
// skipped then, since nn.linear has no hot-row layout.
#include "embedding_passes.hpp"

#include <cmath>
#include <cstring>

#include "pass_util.hpp"
#include "component_names.hpp"

namespace ymlopt::opt {
namespace {

using std::int64_t;
using detail::Buf;
using detail::opt_str;
using detail::run_component;

int64_t opt_int(const PassSpec& s, const std::string& k, int64_t def) {
  auto it = s.options.find(k);
  if (it == s.options.end()) return def;
  try {
    std::size_t used = 0;
    const long long v = std::stoll(it->second, &used);
    if (used == it->second.size()) return v;
  } catch (const std::exception&) {
  }
  throw PassError("option '" + k + "' of " + s.name + " is '" + it->second + "': not an integer");
}

}  // namespace

DType scale_dtype_option(const PassSpec& s) {
  const std::string v = opt_str(s, "scale_dtype", "f32");
  if (v == "f32") return DType::f32;
  if (v == "f16") return DType::f16;
  throw PassError("option 'scale_dtype' of " + s.name + " must be f32 or f16, got '" + v + "'");
}

namespace {

void pass_quant_embedding(PassContext& ctx, const PassSpec& s) {
  const int bits = int(opt_int(s, "bits", 8));
  if (bits != 8 && bits != 4) throw PassError("option 'bits' of quant.embedding must be 8 or 4");
  const int64_t group = opt_int(s, "group", bits == 8 ? 0 : 128);
  if (group != 0 && group != 32 && group != 64 && group != 128)
    throw PassError("option 'group' of quant.embedding must be 0 (per row, bits=8 only), 32, 64 or 128");
  if (bits == 4 && group == 0) throw PassError("quant.embedding with bits=4 needs group=32, 64 or 128");
  const std::string sym = opt_str(s, "symmetric", "true");
  if (sym != "true" && sym != "false") throw PassError("option 'symmetric' of quant.embedding must be true or false");
  const bool symmetric = sym == "true";
  const DType sd = scale_dtype_option(s);
  if (!symmetric && group == 0)
    throw PassError("quant.embedding: symmetric=false needs group=32, 64 or 128 (per-row int8 is symmetric)");
  const auto matches = detail::name_matcher(s);
  // hot rows: the first H ids held apart in int8 (one symmetric scale per row), the rest in 4 bits
  const bool has_rows = s.options.count("hot_rows") > 0, has_fraction = s.options.count("hot_fraction") > 0;
  if (has_rows && has_fraction) throw PassError("quant.embedding: give hot_rows or hot_fraction, not both");
  const int64_t hot_rows = opt_int(s, "hot_rows", 0);
  const double hot_fraction = detail::opt_num(s, "hot_fraction", 0);
  if (has_fraction && !(hot_fraction > 0 && hot_fraction < 1))
    throw PassError("option 'hot_fraction' of quant.embedding is '" + s.options.at("hot_fraction") +
                    "': expected a number in (0, 1)");
  if (hot_rows < 0) throw PassError("option 'hot_rows' of quant.embedding must be >= 0");
  if ((hot_rows > 0 || has_fraction) && bits != 4)
    throw PassError("quant.embedding: hot rows (int8) go with bits=4 for the others");
  // per-row symmetric int8 is quant.int8 (as the linear pass); everything else quant.group
  const std::string component = group == 0 ? components::kQuantInt8 : components::kQuantGroup;
  const std::string format = bits == 4 ? "int4" : "int8";

  std::vector<std::string> skipped;
  nlohmann::json formats = nlohmann::json::object(), tied = nlohmann::json::object();
  int64_t tables = 0, before = 0, after = 0;
  for (const auto& u : ctx.ed.embedding_tables(&skipped)) {
    if (!matches(u.name)) continue;
    if (group > 0 && u.d % group != 0) {
      skipped.push_back(u.name + ": d=" + std::to_string(u.d) + " does not split into groups of " + std::to_string(group));
      continue;
    }
    const int64_t hot = has_fraction ? int64_t(std::llround(hot_fraction * double(u.vocab))) : hot_rows;
    if (hot >= u.vocab) {
      skipped.push_back(u.name + ": hot_rows=" + std::to_string(hot) + " leaves none of its " + std::to_string(u.vocab) +
                        " rows to the 4-bit table");
      continue;
    }
    if (hot > 0 && !u.linear_tasks.empty()) {
      skipped.push_back(u.name + ": tied to nn.linear '" + ModelEditor::task_key(ctx.ed.dag().tasks[u.linear_tasks[0]]) +
                        "', which cannot read hot rows");
      continue;
    }
    const DenseWeight t = ctx.ed.load_table(u);
    const int64_t rows = u.vocab - hot;  // in the table proper: ids hot..vocab-1
    Buf w(DType::f32, rows, u.d);
    std::memcpy(w.bytes.data(), t.w.data() + std::size_t(hot * u.d), w.bytes.size());
    Buf q(DType::i8, rows, bits == 4 ? u.d / 2 : u.d);
    Buf scale = group > 0 ? Buf(sd, rows, u.d / group) : Buf(sd, 1, rows);
    Buf zero(sd, rows, group > 0 ? u.d / group : 1);
    std::map<std::string, Buf*> ports = {{"w", &w}, {"q", &q}, {"scale", &scale}};
    if (!symmetric) ports["zero"] = &zero;
    std::map<std::string, std::string> args;
    if (group > 0) args = {{"bits", std::to_string(bits)}, {"group", std::to_string(group)}, {"symmetric", sym}};
    run_component(ctx.ed.registry(), component, ports, args);
    std::vector<NewTensor> ts = {detail::tensor("w", q), detail::tensor("w_scale", scale)};
    if (!symmetric) ts.push_back(detail::tensor("w_zero", zero));
    int64_t hot_bytes = 0;
    if (hot > 0) {
      Buf hw(DType::f32, hot, u.d), hq(DType::i8, hot, u.d), hs(sd, 1, hot);
      std::memcpy(hw.bytes.data(), t.w.data(), hw.bytes.size());
      std::map<std::string, Buf*> hp = {{"w", &hw}, {"q", &hq}, {"scale", &hs}};
      run_component(ctx.ed.registry(), components::kQuantInt8, hp, {});
      hot_bytes = int64_t(hq.bytes.size() + hs.bytes.size());
      ts.push_back(detail::tensor("w_hot", hq));
      ts.push_back(detail::tensor("w_hot_scale", hs));
    }
    ctx.ed.replace_embedding(u, std::move(ts), {{"format", format}, {"group", std::to_string(group)}});
    ++tables;
    before += u.vocab * u.d * int64_t(dtype_size(ctx.ed.dag().data[std::size_t(u.data)].dtype));
    after += int64_t(q.bytes.size() + scale.bytes.size() + (symmetric ? 0 : zero.bytes.size())) + hot_bytes;
    formats[u.name] = format + " group=" + std::to_string(group) + (symmetric ? " symmetric" : " asymmetric") +
                      " scale=" + dtype_name(sd) +
                      (hot > 0 ? ", ids below " + std::to_string(hot) + " int8 per row" : std::string()) + " (" +
                      component + ", embedding table)";
    if (!u.linear_tasks.empty()) {
      nlohmann::json readers = nlohmann::json::array();
      for (std::size_t i : u.linear_tasks) readers.push_back(ModelEditor::task_key(ctx.ed.dag().tasks[i]));
      tied[u.name] = readers;
    }
  }
  nlohmann::json j = {{"pass", s.text()},          {"tables", tables}, {"weight_bytes_before", before},
                      {"weight_bytes_after", after}, {"formats", formats}};
  if (!tied.empty()) j["tied_linear_readers"] = tied;
  if (!skipped.empty()) j["skipped"] = skipped;
  ctx.log.push_back(j);
}

}  // namespace

PassInfo quant_embedding_pass() {
  return {"quant.embedding",
          "int8/int4 embedding tables (nn.embedding gathers and dequantizes only the rows it reads); a table tied to "
          "an nn.linear with transpose_w=true (GPT-2 lm_head) is read as the same codes by both",
          {{"bits", "8 (default) or 4"},
           {"group", "0 (bits 8 default: one symmetric scale per row), 32, 64 or 128 (bits 4 default)"},
           {"symmetric", "true (default) or false (a zero point per group)"},
           {"scale_dtype", "f32 (default) or f16: scales and zero points stored in f16 (codes rounded against the "
                           "stored values)"},
           {"hot_rows", "bits=4: the first H rows (ids below H) kept in int8 with a scale per row, the others in 4 "
                        "bits; for tokenizers that number pieces by frequency (sentencepiece unigram by score, BPE by "
                        "merge order), the rows read most. Not for a table tied to an nn.linear"},
           {"hot_fraction", "as hot_rows, a fraction of each table's rows (0.25: the first quarter)"},
           {"match", "only tables whose name matches this regex"}},
          pass_quant_embedding};
}

}  // namespace ymlopt::opt
