// nn.embedding: y[i, :] = table[ids[i], :] (transformer_internal.hpp).
#include "nn/transformer_internal.hpp"

#include <cstring>

#include <ymlopt/half.hpp>

#include "nn/embedding_formats.hpp"
#include "nn/nn.hpp"

namespace ymlopt::transformer {

// ============================================================ nn.embedding
// format dense: a row copy in the table's dtype; bf16: bf16 rows widened to f32
// (the table quant.bf16 shares with a tied lm_head); int8/int4: the rows requested
// are dequantized from codes + scales (nn/embedding_formats.hpp) into f32.

const std::vector<PortSpec>& embedding_ports() {
  static const std::vector<PortSpec> p = {
      {"ids", Access::read, {DType::i32}, false, 2, "token ids, shape [tokens] or [tokens, 1]"},
      {"table", Access::read, {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8}, false, 2,
       "embedding table [vocab, d]; format int8: i8 codes [vocab, d], int4: i8 [vocab, d/2] (two codes per byte), "
       "bf16: bf16 [vocab, d]"},
      {"y", Access::write, {DType::f32, DType::f64, DType::f16, DType::bf16}, false, 2,
       "embeddings [tokens, d], dtype of table (f32 for int8/int4/bf16)"},
      {"table_scale", Access::read, {DType::f32, DType::f16}, true, 2,
       "format int8/int4: scales [vocab] (per row) or [vocab, d/group]"},
      {"table_zero", Access::read, {DType::f32, DType::f16}, true, 2,
       "format int8/int4: zero points like table_scale (asymmetric)"},
      {"table_hot", Access::read, {DType::i8}, true, 2,
       "format int8/int4, hot rows: ids below H read int8 codes [H, d] here (one scale per row); table, "
       "table_scale and table_zero then hold rows H.. only"},
      {"table_hot_scale", Access::read, {DType::f32, DType::f16}, true, 2, "hot rows: one scale per row [H]"},
  };
  return p;
}

int64_t num_ids(const TensorView& ids) {
  if (ids.shape.size() <= 1) return ids.rows * ids.cols;
  if (ids.cols == 1) return ids.rows;
  return -1;
}

int embedding_bits(const Args& a) {
  const std::string& f = a.get_string("format");
  return f == "int8" ? 8 : f == "int4" ? 4 : 0;
}

std::string embedding_check(const TaskShape& t) {
  const auto& s = embedding_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = kutil::one_of(t.args, "format", {"dense", "int8", "int4", "bf16"}); !m.empty()) return m;
  const int64_t n = num_ids(p[0]);
  if (n < 0) return "port 'ids' is " + dims(p[0]) + ": expected shape [tokens] or [tokens, 1]";
  const bool widen = t.args.get_string("format") == "bf16";
  if (const int bits = embedding_bits(t.args); bits != 0) {
    if (p[2].rows != n)
      return "port 'y' is " + dims(p[2]) + " but there are " + to_string(n) + " ids (one row per id)";
    return nn::check_compressed_table(s, p, t.args, bits);
  }
  if (p[1].dtype == DType::i8 && !widen)
    return "port 'table' has dtype i8: format=dense needs a float table (set format=int8 or int4 for codes)";
  for (std::size_t i : {nn::kEmbScale, nn::kEmbZero, nn::kEmbHot, nn::kEmbHotScale})
    if (p[i].bound())
      return "port '" + s[i].name + "' is bound but format=" + t.args.get_string("format") + " does not use it";
  if (widen) {
    if (p[1].dtype != DType::bf16)
      return "port 'table' has dtype " + std::string(dtype_name(p[1].dtype)) + " but format=bf16 needs bf16";
    if (p[2].dtype != DType::f32)
      return "port 'y' has dtype " + std::string(dtype_name(p[2].dtype)) + ": format=bf16 gives f32 rows";
  } else if (auto m = kutil::same_dtype(s, p, 2, 1); !m.empty()) {
    return m;
  }
  return expect_shape(s, p, 2, n, p[1].cols, to_string(n) + " ids x table width " + to_string(p[1].cols));
}

Cost embedding_cost(const TaskShape& t) {
  if (t.ports.size() != embedding_ports().size()) return {};
  Cost c;
  const double n = double(std::max<int64_t>(num_ids(t.ports[0]), 0));
  if (embedding_bits(t.args) != 0) {  // ids, the compressed rows read, y; one multiply-add per element
    c.bytes = kutil::bytes_of(t.ports[0]) + n * nn::compressed_row_bytes(t.ports) + kutil::bytes_of(t.ports[2]);
    c.flops = 2 * rows_cols(t.ports[2]);
    return c;
  }
  // ids, the gathered rows (in the table's dtype), y
  const double rows = n * double(t.ports[1].cols) * double(dtype_size(t.ports[1].dtype));
  c.bytes = kutil::bytes_of(t.ports[0]) + rows + kutil::bytes_of(t.ports[2]);
  return c;
}

void embedding_cpu(KernelContext& ctx) {
  kutil::validate(ctx, embedding_ports(), embedding_check);
  const TensorView &ids = ctx.port(0), &table = ctx.port(1), &y = ctx.port(2);
  const int64_t n = num_ids(ids), vocab = table.rows, d = table.cols;
  const auto* id = static_cast<const std::int32_t*>(ids.data);
  const int64_t icols = std::max<int64_t>(ids.cols, 1);
  if (const int bits = embedding_bits(ctx.args()); bits != 0) {
    nn::gather_compressed(ctx.ports(), ctx.args(), bits, id, n, ids.ld, ids.cols);
    return;
  }
  const std::size_t row_bytes = static_cast<std::size_t>(d) * dtype_size(table.dtype);
  const auto* tab = static_cast<const unsigned char*>(table.data);
  auto* out = static_cast<unsigned char*>(y.data);
  const std::size_t es = dtype_size(table.dtype);
  const bool widen = y.dtype != table.dtype;  // format=bf16: bf16 rows into f32 y
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = id[(i / icols) * ids.ld + i % icols];
    if (v < 0 || v >= vocab)
      throw KernelError("id " + to_string(v) + " at position " + to_string(i) + " is out of range: table has " +
                        to_string(vocab) + " rows (ids must be in [0, " + to_string(vocab) + "))");
    if (widen) {
      const auto* src = static_cast<const std::uint16_t*>(table.data) + v * table.ld;
      float* dst = static_cast<float*>(y.data) + i * y.ld;
      for (int64_t c = 0; c < d; ++c) dst[c] = half::bf16_bits_to_float(src[c]);
    } else if (row_bytes) {
      std::memcpy(out + static_cast<std::size_t>(i * y.ld) * es, tab + static_cast<std::size_t>(v * table.ld) * es,
                  row_bytes);
    }
  }
}

// A table stored compressed: the file's record describes W = table [n = vocab,
// k = d] (layout nk), so the companions "w", "w_scale", "w_zero" are the int8/int4
// codes and scales the gather reads (the same ones a tied lm_head nn.linear with
// transpose_w=true reads), or "w" a dense table; "w_hot", "w_hot_scale" the hot rows.
namespace {

std::string embedding_bind(const CompressedWeight& w, CompanionBinding& out) {
  const std::string what = "'" + w.name + "' is stored " + w.format + " in " + w.src;
  if (const ArgValue* f = w.given("format"); f && f->text != "dense")
    return "format=\"" + f->text + "\" but " + what + " (leave format out)";
  if (w.format != "int8" && w.format != "int4" && w.format != "bf16" && w.format != "dense")
    return what + ": nn.embedding reads dense, bf16, int8 or int4 tables only";
  if (!w.nk) return what + " in layout kn ([d, vocab]): nn.embedding needs the table as [vocab, d]";
  if (w.tiled) return what + ": nn.embedding reads the whole compressed table, not a tile";
  const auto& ports = nn::table_companion_ports();
  for (const std::string& role : w.roles) {
    auto it = ports.begin();
    while (it != ports.end() && it->first != role) ++it;
    if (it == ports.end()) return what + " with a '" + role + "' tensor nn.embedding cannot read";
    out.ports.emplace_back(role, it->second);
  }
  if (w.format != "dense") {
    out.args.emplace_back("format", ArgValue{0, w.format});
    out.args.emplace_back("group", ArgValue{double(w.group), std::to_string(w.group)});
  }
  return "";
}

}  // namespace

CompressedReader embedding_reader() {
  CompressedReader r;
  r.port = "table";
  r.when = "when it is a bf16, int8 or int4 table";
  for (const auto& [role, port] : nn::table_companion_ports()) r.roles.push_back(role);
  r.bind = embedding_bind;
  return r;
}

}  // namespace ymlopt::transformer
