// Matrix Market reader and writer (see matrix_market.hpp).
#include "eigen/matrix_market.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>
#include <vector>

namespace ymlopt::eigen {
namespace {

using std::int64_t;

/// Splits a line on blanks and tabs.
std::vector<std::string_view> words(std::string_view line) {
  std::vector<std::string_view> w;
  std::size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
    const std::size_t b = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r') ++i;
    if (i > b) w.push_back(line.substr(b, i - b));
  }
  return w;
}

bool parse_int(std::string_view s, int64_t& v) {
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

bool parse_double(std::string_view s, double& v) {
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
  return r.ec == std::errc() && r.ptr == s.data() + s.size();
}

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

std::string trimmed(std::string_view s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

struct Reader {
  std::istream& in;
  const std::string& name;
  int64_t line_no = 0;
  std::string line;

  Reader(std::istream& i, const std::string& n) : in(i), name(n) {}
  [[noreturn]] void fail(int64_t at, const std::string& why) const {
    throw MatrixMarketError(name + ":" + std::to_string(at) + ": " + why);
  }
  /// The next line that is neither blank nor a % comment; false at the end.
  bool next_data_line() {
    while (std::getline(in, line)) {
      ++line_no;
      const auto w = words(line);
      if (w.empty() || w[0][0] == '%') continue;
      return true;
    }
    return false;
  }
};

/// Rows and columns at most 2^31 - 1 (the components' CSR ports hold i32 indices).
constexpr int64_t kMaxDim = 2147483647;
/// Beyond 2^24 rows, at most this many rows per stored entry (a size line that
/// declares billions of rows for a handful of entries is refused, not allocated).
constexpr int64_t kSparseRows = 64;

struct Triplet {
  int64_t r, c;
  double v;
};

CsrMatrix to_csr(int64_t rows, int64_t cols, std::vector<Triplet>& t) {
  std::sort(t.begin(), t.end(), [](const Triplet& a, const Triplet& b) { return a.r != b.r ? a.r < b.r : a.c < b.c; });
  CsrMatrix s;
  s.rows = rows;
  s.cols = cols;
  s.row_ptr.assign(static_cast<std::size_t>(rows + 1), 0);
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (!s.col.empty() && i > 0 && t[i].r == t[i - 1].r && t[i].c == t[i - 1].c) {
      s.val.back() += t[i].v;  // duplicate: summed
      continue;
    }
    s.col.push_back(t[i].c);
    s.val.push_back(t[i].v);
    ++s.row_ptr[static_cast<std::size_t>(t[i].r + 1)];
  }
  for (int64_t r = 0; r < rows; ++r) s.row_ptr[static_cast<std::size_t>(r + 1)] += s.row_ptr[static_cast<std::size_t>(r)];
  return s;
}

}  // namespace

namespace {

/// The header line and the size line, checked; rd is left on the size line.
MatrixMarketSize read_head(Reader& rd) {
  const std::string expected =
      "expected '%%MatrixMarket matrix <coordinate|array> <real|integer|pattern> <general|symmetric|skew-symmetric>'";
  if (!std::getline(rd.in, rd.line)) rd.fail(1, "empty file, " + expected);
  rd.line_no = 1;
  const auto hw = words(rd.line);
  if (hw.size() != 5 || hw[0] != "%%MatrixMarket" || lower(hw[1]) != "matrix")
    rd.fail(1, "bad header '" + trimmed(rd.line) + "': " + expected);
  MatrixMarketSize z;
  MatrixMarketHeader& h = z.header;
  h = {lower(hw[2]), lower(hw[3]), lower(hw[4])};
  if (h.format != "coordinate" && h.format != "array")
    rd.fail(1, "format '" + h.format + "' is not supported (coordinate or array)");
  if (h.field != "real" && h.field != "integer" && h.field != "pattern")
    rd.fail(1, "field '" + h.field + "' is not supported (real, integer or pattern)");
  if (h.symmetry != "general" && h.symmetry != "symmetric" && h.symmetry != "skew-symmetric")
    rd.fail(1, "symmetry '" + h.symmetry + "' is not supported (general, symmetric or skew-symmetric)");
  if (h.format == "array" && h.field == "pattern") rd.fail(1, "an array matrix cannot have field 'pattern'");
  const bool coord = h.format == "coordinate";
  const std::string size_form = coord ? "'rows cols entries'" : "'rows cols'";
  if (!rd.next_data_line()) rd.fail(rd.line_no + 1, "file ends before the size line " + size_form);
  const auto sw = words(rd.line);
  if (sw.size() != (coord ? 3u : 2u) || !parse_int(sw[0], z.rows) || !parse_int(sw[1], z.cols) ||
      (coord && !parse_int(sw[2], z.entries)) || z.rows < 0 || z.cols < 0 || z.entries < 0)
    rd.fail(rd.line_no, "bad size line '" + trimmed(rd.line) + "': expected " + size_form +
                            " (non-negative integers)");
  if (h.symmetry != "general" && z.rows != z.cols)
    rd.fail(rd.line_no, "a " + h.symmetry + " matrix must be square, got " + std::to_string(z.rows) + " x " +
                            std::to_string(z.cols));
  if (z.rows > kMaxDim || z.cols > kMaxDim)
    rd.fail(rd.line_no, "a " + std::to_string(z.rows) + " x " + std::to_string(z.cols) +
                            " matrix: rows and columns are limited to 2^31 - 1");
  if (!coord)  // the values the array stores: all, the lower triangle with or without the diagonal
    z.entries = h.symmetry == "general"         ? z.rows * z.cols
                : h.symmetry == "symmetric"     ? z.rows * (z.rows + 1) / 2
                                                : z.rows * (z.rows - 1) / 2;
  return z;
}

}  // namespace

int64_t MatrixMarketSize::max_nonzeros() const {
  return header.symmetry == "general" ? entries : 2 * entries;
}

MatrixMarketSize read_matrix_market_size(const std::string& path) {
  std::ifstream f(path);
  if (!f) throw MatrixMarketError(path + ":0: cannot open the file");
  Reader rd{f, path};
  return read_head(rd);
}

CsrMatrix parse_matrix_market(std::istream& in, const std::string& name, MatrixMarketHeader* header) {
  Reader rd{in, name};
  const MatrixMarketSize z = read_head(rd);
  const MatrixMarketHeader& h = z.header;
  if (header) *header = h;
  const bool coord = h.format == "coordinate", pattern = h.field == "pattern";
  const bool sym = h.symmetry == "symmetric", skew = h.symmetry == "skew-symmetric";
  const int64_t rows = z.rows, cols = z.cols;
  const int64_t nnz = z.entries;  // coordinate: the size line's; array: the values it stores
  const int64_t size_line = rd.line_no;

  std::vector<Triplet> t;
  auto add = [&](int64_t r, int64_t c, double v) {
    t.push_back({r, c, v});
    if (r != c && (sym || skew)) t.push_back({c, r, skew ? -v : v});
  };
  if (coord) {
    if (double(nnz) > double(rows) * double(cols))
      rd.fail(size_line, "size line declares " + std::to_string(nnz) + " entries, more than " +
                             std::to_string(rows) + " x " + std::to_string(cols));
    // the entries are read before they are stored: memory follows the file, not its size line
    t.reserve(static_cast<std::size_t>(std::min<int64_t>((sym || skew) ? 2 * nnz : nnz, 1 << 20)));
    const std::string entry_form = pattern ? "'row col'" : "'row col value'";
    for (int64_t e = 0; e < nnz; ++e) {
      if (!rd.next_data_line())
        rd.fail(rd.line_no + 1, "file ends after " + std::to_string(e) + " of the " + std::to_string(nnz) +
                                    " entries declared on line " + std::to_string(size_line));
      const auto w = words(rd.line);
      int64_t r = 0, c = 0;
      double v = 1.0;
      if (w.size() != (pattern ? 2u : 3u) || !parse_int(w[0], r) || !parse_int(w[1], c) ||
          (!pattern && !parse_double(w[2], v)))
        rd.fail(rd.line_no, "bad entry '" + trimmed(rd.line) + "': expected " + entry_form);
      if (r < 1 || r > rows || c < 1 || c > cols)
        rd.fail(rd.line_no, "index (" + std::to_string(r) + ", " + std::to_string(c) + ") out of range for a " +
                                std::to_string(rows) + " x " + std::to_string(cols) + " matrix (indices are 1-based)");
      if (!std::isfinite(v)) rd.fail(rd.line_no, "value '" + std::string(w[2]) + "' is not finite");
      if ((sym || skew) && c > r)
        rd.fail(rd.line_no, "entry (" + std::to_string(r) + ", " + std::to_string(c) + ") is above the diagonal of a " +
                                h.symmetry + " matrix (only the lower triangle is stored)");
      if (skew && c == r)
        rd.fail(rd.line_no, "diagonal entry (" + std::to_string(r) + ", " + std::to_string(c) +
                                ") in a skew-symmetric matrix");
      add(r - 1, c - 1, v);
    }
  } else {
    // Column-major; symmetric: the lower triangle with the diagonal, skew: strictly lower.
    auto first_row = [&](int64_t col) { return sym ? col : skew ? col + 1 : 0; };  // of column col's values
    int64_t c = 0, r = first_row(0);
    for (int64_t e = 0; e < nnz; ++e) {
      if (!rd.next_data_line())
        rd.fail(rd.line_no + 1, "file ends after " + std::to_string(e) + " of the " + std::to_string(nnz) +
                                    " values of a " + std::to_string(rows) + " x " + std::to_string(cols) + " " +
                                    h.symmetry + " array");
      const auto w = words(rd.line);
      double v = 0;
      if (w.size() != 1 || !parse_double(w[0], v))
        rd.fail(rd.line_no, "bad value '" + trimmed(rd.line) + "': expected one number");
      if (!std::isfinite(v)) rd.fail(rd.line_no, "value '" + std::string(w[0]) + "' is not finite");
      if (v != 0) add(r, c, v);
      for (++r; r >= rows && c < cols;) r = first_row(++c);  // the next column with values
    }
  }
  if (rd.next_data_line())
    rd.fail(rd.line_no, "more " + std::string(coord ? "entries" : "values") + " than the " + std::to_string(nnz) +
                            " declared" + (coord ? " on line " + std::to_string(size_line) : std::string()));
  // the row pointers are rows + 1 integers: a size line cannot make them outgrow the file
  if (rows > kSparseRows * std::max<int64_t>(int64_t(t.size()), 1) + (int64_t(1) << 24))
    rd.fail(size_line, std::to_string(rows) + " rows for " + std::to_string(t.size()) +
                           " stored entries: more than " + std::to_string(kSparseRows) +
                           " empty rows per entry (refused: the row pointers alone would take " +
                           std::to_string((rows + 1) * 8 >> 20) + " MiB)");
  return to_csr(rows, cols, t);
}

CsrMatrix read_matrix_market(const std::string& path, MatrixMarketHeader* header) {
  std::ifstream f(path);
  if (!f) throw MatrixMarketError(path + ":0: cannot open the file");
  return parse_matrix_market(f, path, header);
}

void write_matrix_market(const std::string& path, const CsrMatrix& a, const std::string& comment) {
  std::ofstream f(path);
  if (!f) throw MatrixMarketError(path + ":0: cannot create the file");
  f << "%%MatrixMarket matrix coordinate real general\n";
  std::istringstream cs(comment);
  for (std::string l; std::getline(cs, l);) f << "% " << l << "\n";
  f << a.rows << " " << a.cols << " " << a.nnz() << "\n";
  f.precision(17);
  for (int64_t r = 0; r < a.rows; ++r)
    for (int64_t p = a.row_ptr[static_cast<std::size_t>(r)]; p < a.row_ptr[static_cast<std::size_t>(r + 1)]; ++p)
      f << r + 1 << " " << a.col[static_cast<std::size_t>(p)] + 1 << " " << a.val[static_cast<std::size_t>(p)] << "\n";
  if (!f) throw MatrixMarketError(path + ":0: write failed");
}

}  // namespace ymlopt::eigen
