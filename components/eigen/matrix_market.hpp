// Matrix Market files (https://math.nist.gov/MatrixMarket/formats.html) to and
// from the CsrMatrix of eigen.hpp.
//
// Read: `coordinate` with field real, integer or pattern (pattern entries are 1)
// and symmetry general, symmetric or skew-symmetric (the stored lower triangle
// is mirrored); `array` real/integer general, symmetric or skew-symmetric
// (column-major values). Duplicate coordinate entries are summed. Every error is
// a MatrixMarketError whose message is exactly "PATH:LINE: reason", e.g.
//   "m.mtx:7: index (5, 1) out of range for a 4 x 4 matrix (indices are 1-based)"
//
//   using namespace ymlopt::eigen;
//   CsrMatrix a = read_matrix_market("af23560.mtx");
//   LinearOperator op = csr_operator(a);
//   write_matrix_market("copy.mtx", a, "written by ymlopt");
#pragma once

#include <cstdint>
#include <iosfwd>
#include <string>

#include "eigen/eigen.hpp"

namespace ymlopt::eigen {

/// A malformed or unsupported Matrix Market file: the message is "PATH:LINE: reason".
struct MatrixMarketError : KernelError {
  using KernelError::KernelError;
};

/// The header line's words, as read (lower case).
struct MatrixMarketHeader {
  std::string format;    // coordinate | array
  std::string field;     // real | integer | pattern
  std::string symmetry;  // general | symmetric | skew-symmetric
};

/// What a file's header and size line say (its entries are not read): rows,
/// columns and the entries it stores (an array: the values of its stored part).
struct MatrixMarketSize {
  std::int64_t rows = 0, cols = 0, entries = 0;
  MatrixMarketHeader header;
  /// At most this many nonzeros once read (symmetric and skew-symmetric halves mirrored).
  std::int64_t max_nonzeros() const;
};

/// Reads only the header and the size line of the file at `path` (MatrixMarketError as below).
MatrixMarketSize read_matrix_market_size(const std::string& path);

/// Reads the file at `path` into CSR (columns sorted within each row).
///
///   MatrixMarketHeader h;  CsrMatrix a = read_matrix_market("m.mtx", &h);
CsrMatrix read_matrix_market(const std::string& path, MatrixMarketHeader* header = nullptr);

/// Parses a Matrix Market stream; `name` is the PATH used in error messages.
CsrMatrix parse_matrix_market(std::istream& in, const std::string& name, MatrixMarketHeader* header = nullptr);

/// Writes `a` as "coordinate real general" with 17 significant digits (exact
/// round trip); `comment` (may hold several lines) goes after the header as % lines.
void write_matrix_market(const std::string& path, const CsrMatrix& a, const std::string& comment = "");

}  // namespace ymlopt::eigen
