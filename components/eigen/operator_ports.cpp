#include "eigen/operator_ports.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <utility>

#include <ymlopt/kernel_util.hpp>

namespace ymlopt::eigen_util {
namespace {

using std::int64_t;
using std::to_string;

/// The entries of row i of a CSR matrix, sorted by column, duplicates summed.
void sorted_row(const std::int32_t* ptr, const std::int32_t* col, const double* val, int64_t i,
                std::vector<std::pair<std::int32_t, double>>& out) {
  out.clear();
  for (int64_t e = ptr[i]; e < ptr[i + 1]; ++e) out.emplace_back(col[e], val[e]);
  std::sort(out.begin(), out.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  std::size_t w = 0;
  for (std::size_t r = 0; r < out.size(); ++r) {
    if (w > 0 && out[w - 1].first == out[r].first) out[w - 1].second += out[r].second;
    else out[w++] = out[r];
  }
  out.resize(w);
}

}  // namespace

OperatorFormat format_of(const Args& a) {
  return a.get_string("format") == "csr" ? OperatorFormat::csr : OperatorFormat::dense;
}

ParamSpec format_param() {
  return {"format", ParamType::string_, "dense", false,
          "dense (port a is A [n,n]) or csr (a holds the values [cap], a_index their columns i32 [cap], a_ptr the "
          "row pointers i32 [n+1]; cap >= nonzeros)"};
}

std::vector<PortSpec> with_csr_ports(std::vector<PortSpec> ports) {
  ports.push_back({"a_index", Access::read, {DType::i32}, true, 1, "format=csr: the column of each value in a [cap]"});
  ports.push_back({"a_ptr", Access::read, {DType::i32}, true, 1, "format=csr: row pointers [n+1] into a and a_index"});
  return ports;
}

std::string check_matrix_ports(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& args,
                               std::size_t a, std::size_t index, std::size_t ptr, bool written, int64_t* rows,
                               int64_t* cols) {
  if (auto m = kutil::one_of(args, "format", {"dense", "csr"}); !m.empty()) return m;
  if (format_of(args) == OperatorFormat::dense) {
    for (std::size_t i : {index, ptr})
      if (p[i].bound())
        return "port '" + s[i].name + "' is only " + (written ? "written" : "read") +
               " with format=csr (this task has format=dense)";
    *rows = p[a].rows;
    *cols = p[a].cols;
  } else {
    if (!p[index].bound() || !p[ptr].bound())
      return "format=csr needs ports '" + s[index].name + "' (columns) and '" + s[ptr].name + "' (row pointers)";
    if (p[a].rows != 1)
      return "port '" + s[a].name + "' is " + kutil::dims(p[a]) + ": format=csr " + (written ? "writes" : "takes") +
             " a vector of values";
    if (p[index].rows != 1 || p[index].cols != p[a].cols)
      return "port '" + s[index].name + "' is " + kutil::dims(p[index]) + " but port '" + s[a].name + "' holds " +
             to_string(p[a].cols) + " values: one column per value";
    for (std::size_t i : {index, ptr})
      if (p[i].dtype != DType::i32)
        return "port '" + s[i].name + "' has dtype " + dtype_name(p[i].dtype) + ": format=csr indices are i32";
    if (p[ptr].rows != 1 || p[ptr].cols < 2)
      return "port '" + s[ptr].name + "' is " + kutil::dims(p[ptr]) + ": row pointers [n+1] with n >= 1";
    *rows = *cols = p[ptr].cols - 1;
  }
  if (*rows < 1 || *cols < 1)
    return "port '" + s[a].name + "' is " + kutil::dims(p[a]) + ": the " + (written ? "matrix" : "operator") +
           " is empty";
  return "";
}

std::string check_matrix(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& args,
                         std::size_t a, std::size_t index, std::size_t ptr, int64_t* rows, int64_t* cols) {
  if (auto m = check_matrix_ports(s, p, args, a, index, ptr, false, rows, cols); !m.empty()) return m;
  if (format_of(args) == OperatorFormat::csr) {
    const int64_t c = args.get_int("cols");
    if (c < 0) return "param 'cols' is " + to_string(c) + ": must be >= 0 (0: as many as rows)";
    if (c > INT32_MAX) return "param 'cols' is " + to_string(c) + ": format=csr columns are i32";
    if (c > 0) *cols = c;
  }
  return "";
}

std::string check_operator(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& args,
                           std::size_t a, std::size_t index, std::size_t ptr, int64_t* n) {
  int64_t cols = 0;
  if (auto m = check_matrix_ports(s, p, args, a, index, ptr, false, n, &cols); !m.empty()) return m;
  if (format_of(args) == OperatorFormat::dense) return kutil::square(s, p, a);
  return "";
}

double matvec_flops(std::span<const TensorView> p, const Args& args, std::size_t a) {
  if (format_of(args) == OperatorFormat::csr) return 2.0 * double(p[a].cols);
  return 2.0 * double(p[a].rows) * double(p[a].rows);
}

void check_csr_rows(const std::int32_t* ptr, const std::int32_t* col, int64_t n, int64_t cap, int64_t cols,
                    int64_t r0, int64_t r1) {
  if (ptr[0] != 0) throw KernelError("port 'a_ptr' starts at " + to_string(ptr[0]) + ": row pointers start at 0");
  if (ptr[r0] < 0 || ptr[r0] > cap)  // rows before r0 are not read: their end must still be in range
    throw KernelError("port 'a_ptr' entry " + to_string(r0) + " is " + to_string(ptr[r0]) + ", outside [0, " +
                      to_string(cap) + "]");
  for (int64_t i = r0; i < r1; ++i)
    if (ptr[i + 1] < ptr[i])
      throw KernelError("port 'a_ptr' decreases at row " + to_string(i) + " (" + to_string(ptr[i]) + " -> " +
                        to_string(ptr[i + 1]) + ")");
  if (ptr[r1] > cap) {
    const std::string where = r1 == n ? "ends at " + to_string(ptr[r1])
                                      : "reaches " + to_string(ptr[r1]) + " at row " + to_string(r1) + ",";
    throw KernelError("port 'a_ptr' " + where + " but ports 'a' and 'a_index' hold " + to_string(cap) + " values");
  }
  for (int64_t e = ptr[r0]; e < ptr[r1]; ++e)
    if (col[e] < 0 || col[e] >= cols)
      throw KernelError("port 'a_index' entry " + to_string(e) + " is column " + to_string(col[e]) + ", outside [0, " +
                        to_string(cols) + ")");
}

PortOperator::PortOperator(const TensorView& a, const TensorView& index, const TensorView& ptr, OperatorFormat f,
                           int64_t cols)
    : dtype_(a.dtype), format_(f) {
  if (f == OperatorFormat::dense) {
    n_ = a.rows;
    cols_ = a.cols;
    nnz_ = n_ * cols_;
    const DoubleMatrix& d = dense_.emplace(a);  // a view of f64 data, or a copy of f32
    if (n_ == cols_) op_ = eigen::dense_operator(d.data, n_, d.ld);
    return;
  }
  n_ = ptr.cols - 1;
  cols_ = cols > 0 ? cols : n_;
  const int64_t cap = a.cols;
  ptr_ = static_cast<const std::int32_t*>(ptr.data);
  col_ = static_cast<const std::int32_t*>(index.data);
  check_csr_rows(ptr_, col_, n_, cap, cols_, 0, n_);
  nnz_ = ptr_[n_];
  if (a.dtype == DType::f64) {
    val_ = static_cast<const double*>(a.data);
  } else {
    copy_.assign(static_cast<const float*>(a.data), static_cast<const float*>(a.data) + nnz_);
    val_ = copy_.data();
  }
  if (n_ != cols_) return;
  const std::int32_t *rp = ptr_, *ci = col_;
  const double* va = val_;
  const int64_t n = n_;
  op_ = {n, [rp, ci, va, n](const double* x, double* y) {
           for (int64_t i = 0; i < n; ++i) {
             double acc = 0;
             for (int64_t e = rp[i]; e < rp[i + 1]; ++e) acc += va[e] * x[ci[e]];
             y[i] = acc;
           }
         }};
}

eigen::BlockOperator PortOperator::block() const {
  if (format_ == OperatorFormat::dense) return eigen::dense_block_operator(dense_->data, n_, cols_, dense_->ld);
  const std::int32_t *rp = ptr_, *ci = col_;
  const double* va = val_;
  const int64_t rows = n_, cols = cols_;
  return {rows, cols,
          [=](const double* x, int64_t l, double* y) {  // y[i, :] = sum_e a_ie x[col_e, :]
            std::fill_n(y, rows * l, 0.0);
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t e = rp[i]; e < rp[i + 1]; ++e)
                for (int64_t j = 0; j < l; ++j) y[i * l + j] += va[e] * x[ci[e] * l + j];
          },
          [=](const double* y, int64_t l, double* z) {  // z[col_e, :] += a_ie y[i, :]
            std::fill_n(z, cols * l, 0.0);
            for (int64_t i = 0; i < rows; ++i)
              for (int64_t e = rp[i]; e < rp[i + 1]; ++e)
                for (int64_t j = 0; j < l; ++j) z[ci[e] * l + j] += va[e] * y[i * l + j];
          }};
}

void PortOperator::require_symmetric(const std::string& hint) const {
  double amax = 0, dmax = 0;
  int64_t wi = 0, wj = 0;
  auto note = [&](int64_t i, int64_t j, double aij, double aji) {
    amax = std::max({amax, std::abs(aij), std::abs(aji)});
    if (std::abs(aij - aji) > dmax) dmax = std::abs(aij - aji), wi = i, wj = j;
  };
  if (format_ == OperatorFormat::dense) {
    const double* d = dense_->data;
    const int64_t ld = dense_->ld;
    for (int64_t i = 0; i < n_; ++i)
      for (int64_t j = i; j < n_; ++j) note(i, j, d[i * ld + j], d[j * ld + i]);
  } else {
    // Aᵀ by a counting sort, then row i of A against row i of Aᵀ.
    std::vector<std::int32_t> tptr(static_cast<std::size_t>(n_ + 1), 0), tcol(static_cast<std::size_t>(nnz_));
    std::vector<double> tval(static_cast<std::size_t>(nnz_));
    for (int64_t e = 0; e < nnz_; ++e) ++tptr[static_cast<std::size_t>(col_[e] + 1)];
    for (int64_t i = 0; i < n_; ++i) tptr[static_cast<std::size_t>(i + 1)] += tptr[static_cast<std::size_t>(i)];
    std::vector<std::int32_t> fill(tptr.begin(), tptr.end() - 1);
    for (int64_t i = 0; i < n_; ++i)
      for (int64_t e = ptr_[i]; e < ptr_[i + 1]; ++e) {
        const auto at = static_cast<std::size_t>(fill[static_cast<std::size_t>(col_[e])]++);
        tcol[at] = static_cast<std::int32_t>(i);
        tval[at] = val_[e];
      }
    std::vector<std::pair<std::int32_t, double>> ra, rt;
    for (int64_t i = 0; i < n_; ++i) {
      sorted_row(ptr_, col_, val_, i, ra);
      sorted_row(tptr.data(), tcol.data(), tval.data(), i, rt);
      std::size_t x = 0, y = 0;
      while (x < ra.size() || y < rt.size()) {
        if (y == rt.size() || (x < ra.size() && ra[x].first < rt[y].first)) note(i, ra[x].first, ra[x].second, 0), ++x;
        else if (x == ra.size() || rt[y].first < ra[x].first) note(i, rt[y].first, 0, rt[y].second), ++y;
        else note(i, ra[x].first, ra[x].second, rt[y].second), ++x, ++y;
      }
    }
  }
  const double rel = dtype_ == DType::f64 ? 1e-10 : 1e-5;
  if (dmax > rel * amax)
    throw KernelError("port 'a' is not symmetric: |a[" + to_string(wi) + "," + to_string(wj) + "] - a[" +
                      to_string(wj) + "," + to_string(wi) + "]| = " + std::to_string(dmax) + " (" + hint + ")");
}

}  // namespace ymlopt::eigen_util
