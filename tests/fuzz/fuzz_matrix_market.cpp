// libFuzzer target: any bytes as a Matrix Market file (eigen.matrix_market's
// input). Each parse must end with a CsrMatrix whose row pointers, columns and
// values are consistent, or with a MatrixMarketError: never a crash, a
// sanitizer report, a hang or an allocation sized by the size line. Built and
// replayed like fuzz_workflow.cpp:
//
//   build-fuzz/bin/ymlopt_fuzz_matrix_market -max_total_time=600 /tmp/mcorpus tests/fuzz/corpus_matrix_market
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "eigen/matrix_market.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  ymlopt::eigen::CsrMatrix a;
  try {
    a = ymlopt::eigen::parse_matrix_market(in, "fuzz.mtx");
  } catch (const ymlopt::eigen::MatrixMarketError&) {
    return 0;
  }
  // what csr_operator and the components' CSR ports rely on
  if (a.row_ptr.size() != static_cast<std::size_t>(a.rows + 1) || a.row_ptr.front() != 0 ||
      a.row_ptr.back() != a.nnz() || a.col.size() != a.val.size())
    std::abort();
  for (std::int64_t r = 0; r < a.rows; ++r)
    if (a.row_ptr[static_cast<std::size_t>(r + 1)] < a.row_ptr[static_cast<std::size_t>(r)]) std::abort();
  for (std::int64_t c : a.col)
    if (c < 0 || c >= a.cols) std::abort();
  if (a.rows == a.cols && a.rows > 0) {
    std::vector<double> x(static_cast<std::size_t>(a.rows), 1.0), y(x.size());
    ymlopt::eigen::csr_operator(a).apply(x.data(), y.data());
  }
  return 0;
}
