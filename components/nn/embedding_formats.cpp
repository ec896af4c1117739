#include "nn/embedding_formats.hpp"

#include <algorithm>

#include "quant/qlinear.hpp"
#include <ymlopt/kernel_util.hpp>

namespace ymlopt::nn {
namespace {

using std::int64_t;
using std::to_string;

const char* fmt(int bits) { return bits == 4 ? "format=int4" : "format=int8"; }

/// "" when port i (bound) is [rows, cols], or a vector of rows elements when cols == 1.
std::string want_shape(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i, int64_t rows,
                       int64_t cols, const std::string& why) {
  const TensorView& v = p[i];
  if (v.rows == rows && v.cols == cols) return "";
  if (cols == 1 && v.rows * v.cols == rows && (v.rows == 1 || v.cols == 1)) return "";
  return "port '" + s[i].name + "' is " + kutil::dims(v) + " but expected " + to_string(rows) + "x" +
         to_string(cols) + " (" + why + ")";
}

/// The table as the quantized-weight view of quant:: (rows = vocab, k = d).
quant::QWeight table_weight(std::span<const TensorView> p, const Args& a, int bits) {
  return quant::QWeight::of(bits, p[kEmbTable], p[kEmbScale], p[kEmbZero], p[kEmbTable].rows, p[kEmbY].cols,
                            a.get_int("group"));
}

}  // namespace

std::string check_compressed_table(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& a,
                                   int bits) {
  const TensorView &t = p[kEmbTable], &y = p[kEmbY], &sc = p[kEmbScale], &z = p[kEmbZero];
  const std::string f = fmt(bits);
  if (t.dtype != DType::i8)
    return "port 'table' has dtype " + std::string(dtype_name(t.dtype)) + " but " + f + " needs i8 (" +
           (bits == 4 ? "two 4-bit codes per byte" : "int8 codes") + ")";
  if (y.dtype != DType::f32)
    return "port 'y' has dtype " + std::string(dtype_name(y.dtype)) + " but " + f +
           " needs f32 (the dequantized rows)";
  const int64_t d = y.cols, vocab = t.rows, group = a.get_int("group");
  if (group < 0) return "param 'group' is " + to_string(group) + ": must be >= 0 (0: one scale per row)";
  if (group > 0 && group != 32 && group % 64 != 0)
    return "param 'group' is " + to_string(group) + ": expected 0 (one scale per row), 32 or a multiple of 64";
  if (group > 0 && d % group != 0)
    return "param 'group' is " + to_string(group) + " but y has " + to_string(d) +
           " columns: groups must tile the rows of the table";
  if (bits == 4 && d % 2 != 0) return "y has " + to_string(d) + " columns: format=int4 needs an even width";
  const int64_t code_cols = bits == 4 ? d / 2 : d;
  if (t.cols != code_cols)
    return "port 'table' is " + kutil::dims(t) + " but y is " + kutil::dims(y) + ": " + f + " needs table [vocab, " +
           (bits == 4 ? "d/2" : "d") + "] = " + to_string(vocab) + "x" + to_string(code_cols) + " with d = y columns";
  if (!sc.bound()) return "port 'table_scale' is not bound: " + f + " needs it";
  const int64_t g = group > 0 ? d / group : 1;
  const std::string per = group > 0 ? "one scale per row and group of " + to_string(group) : "one scale per row";
  const TensorView &hot = p[kEmbHot], &hs = p[kEmbHotScale];
  if (hs.bound() && !hot.bound()) return "port 'table_hot_scale' is bound but table_hot is not";
  if (hot.bound()) {
    if (hot.dtype != DType::i8)
      return "port 'table_hot' has dtype " + std::string(dtype_name(hot.dtype)) + " but hot rows are int8 codes (i8)";
    if (hot.cols != d)
      return "port 'table_hot' is " + kutil::dims(hot) + " but y has " + to_string(d) +
             " columns: hot rows are [hot, d] int8 codes";
    if (!hs.bound()) return "port 'table_hot_scale' is not bound: hot rows need one scale each";
    if (hs.dtype != DType::f32 && hs.dtype != DType::f16)
      return "port 'table_hot_scale' has dtype " + std::string(dtype_name(hs.dtype)) + ": expected f32 or f16";
    if (auto m = want_shape(s, p, kEmbHotScale, hot.rows, 1, "one scale per hot row"); !m.empty()) return m;
  }
  return kutil::first_error(
      {(sc.dtype == DType::f32 || sc.dtype == DType::f16)
           ? std::string()
           : "port 'table_scale' has dtype " + std::string(dtype_name(sc.dtype)) + ": expected f32 or f16",
       want_shape(s, p, kEmbScale, vocab, g, per),
       z.bound() && z.dtype != DType::f32 && z.dtype != DType::f16
           ? "port 'table_zero' has dtype " + std::string(dtype_name(z.dtype)) + ": expected f32 or f16 (zero points)"
           : std::string(),
       z.bound() ? want_shape(s, p, kEmbZero, vocab, g, "one zero point per scale") : std::string()});
}

double compressed_row_bytes(std::span<const TensorView> p) {
  auto row = [&](std::initializer_list<std::size_t> ports) {
    double b = 0;
    for (std::size_t i : ports) {
      if (i >= p.size()) continue;
      const TensorView& v = p[i];
      if (!v.bound() || v.rows * v.cols == 0) continue;
      const bool table = i == kEmbTable || i == kEmbHot;
      const double rows = v.rows == 1 && !table ? double(v.cols) : double(v.rows);  // [vocab] vectors
      b += kutil::bytes_of(v) / std::max(rows, 1.0);
    }
    return b;
  };
  const bool hot = p.size() > kEmbHot && p[kEmbHot].bound() && p[kEmbHot].rows > 0;
  return hot ? row({kEmbHot, kEmbHotScale}) : row({kEmbTable, kEmbScale, kEmbZero});
}

void gather_compressed(std::span<const TensorView> p, const Args& a, int bits, const std::int32_t* ids, int64_t n,
                       int64_t ids_ld, int64_t ids_cols) {
  const quant::QWeight w = table_weight(p, a, bits);
  if (const std::string e = quant::validate(w); !e.empty()) throw KernelError("nn.embedding: " + e);
  const TensorView& y = p[kEmbY];
  // the hot rows (ids below their count) apart in int8, one scale per row
  const int64_t hot = p[kEmbHot].bound() ? p[kEmbHot].rows : 0;
  quant::QWeight h;
  if (hot > 0) {
    h = quant::QWeight::of(8, p[kEmbHot], p[kEmbHotScale], TensorView{}, hot, y.cols, 0);
    if (const std::string e = quant::validate(h); !e.empty()) throw KernelError("nn.embedding: hot rows: " + e);
  }
  auto* out = static_cast<float*>(y.data);
  const int64_t vocab = hot + w.n, cols = std::max<int64_t>(ids_cols, 1);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = ids[(i / cols) * ids_ld + i % cols];
    if (v < 0 || v >= vocab)
      throw KernelError("id " + to_string(v) + " at position " + to_string(i) + " is out of range: table has " +
                        to_string(vocab) + " rows (ids must be in [0, " + to_string(vocab) + "))");
    if (w.k == 0) continue;
    if (v < hot) quant::dequantize(h.rows(v, v + 1), out + i * y.ld, y.ld);
    else quant::dequantize(w.rows(v - hot, v - hot + 1), out + i * y.ld, y.ld);
  }
}

}  // namespace ymlopt::nn
