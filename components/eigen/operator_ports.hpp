// The operator an eigen.* component works on, read from its ports: a dense
// A [n,n], or with arg format=csr a square matrix kept sparse in CSR:
//
//   a        f32|f64 [cap]  the stored values (the first a_ptr[n] are used)
//   a_index  i32 [cap]      the column of each value
//   a_ptr    i32 [n+1]      row i is entries [a_ptr[i], a_ptr[i+1])
//
// cap >= the nonzeros, so a workflow sizes the three tensors before the matrix
// is read or generated (eigen.matrix_market and eigen.generate write them with
// format=csr, the unused tail zero). The index arrays are checked when the task
// runs (a lie is a KernelError naming the port and entry, never a read out of
// bounds); f32 values are copied to double once per task.
//
//   const eigen_util::PortOperator a(ctx.port(0), ctx.port(kIndex), ctx.port(kPtr), eigen_util::format_of(ctx.args()));
//   eigen::arnoldi(a.op(), options);
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "eigen/component_util.hpp"
#include "eigen/eigen.hpp"
#include <ymlopt/sdk.hpp>

namespace ymlopt::eigen_util {

enum class OperatorFormat { dense, csr };

/// Arg `format` (dense | csr) of the task.
OperatorFormat format_of(const Args& a);

/// The `format` parameter, and a component's ports followed by the two
/// optional index ports (a_index, a_ptr).
ParamSpec format_param();
std::vector<PortSpec> with_csr_ports(std::vector<PortSpec> ports);

/// "" when ports a, index and ptr hold a matrix in the task's format (dense:
/// a [rows, cols]; csr: as many columns as rows here); `written`: the task
/// writes them (the messages say so). Shared by readers and writers.
std::string check_matrix_ports(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& args,
                               std::size_t a, std::size_t index, std::size_t ptr, bool written, std::int64_t* rows,
                               std::int64_t* cols);

/// "" when ports a, index and ptr describe a square operator in the task's
/// format; then *n is its dimension. The message names the port and the fix.
std::string check_operator(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& args,
                           std::size_t a, std::size_t index, std::size_t ptr, std::int64_t* n);

/// The same for a matrix of any shape (eigen.svd_topk): *rows and *cols; with
/// format=csr the columns are the task's arg `cols` (0: as many as rows).
std::string check_matrix(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& args,
                         std::size_t a, std::size_t index, std::size_t ptr, std::int64_t* rows, std::int64_t* cols);

/// Multiply-adds of one product with the operator (2 n² dense, 2 cap CSR), for costs.
double matvec_flops(std::span<const TensorView> p, const Args& args, std::size_t a);

/// Checks rows [r0, r1) of CSR arrays (n rows, cap entries, cols columns):
/// pointers from 0, not decreasing, within cap, and those rows' columns in
/// [0, cols). Throws KernelError naming the port and entry; reads only the
/// rows' pointers and entries (eigen.csr_block checks its block alone).
void check_csr_rows(const std::int32_t* ptr, const std::int32_t* col, std::int64_t n, std::int64_t cap,
                    std::int64_t cols, std::int64_t r0, std::int64_t r1);

/// The operator of the ports, ready to apply (kept by the object: it must outlive
/// the solver's use of op()). Throws KernelError on invalid CSR arrays. `cols`:
/// a CSR matrix's columns (0: square).
class PortOperator {
 public:
  PortOperator(const TensorView& a, const TensorView& index, const TensorView& ptr, OperatorFormat f,
               std::int64_t cols = 0);
  PortOperator(const PortOperator&) = delete;
  PortOperator& operator=(const PortOperator&) = delete;

  /// y = A x (a square A).
  const eigen::LinearOperator& op() const { return op_; }
  /// Products with blocks of vectors, A x and Aᵀ y (any shape).
  eigen::BlockOperator block() const;
  std::int64_t n() const { return n_; }
  std::int64_t cols() const { return cols_; }
  /// Stored entries (n² for dense).
  std::int64_t nnz() const { return nnz_; }
  /// format=csr: the validated arrays (values as double).
  const std::int32_t* row_ptr() const { return ptr_; }
  const std::int32_t* col_index() const { return col_; }
  const double* values() const { return val_; }
  /// Throws unless A = Aᵀ to a relative 1e-10 (f64 values) or 1e-5 (f32); `hint`
  /// ends the message (what to use instead).
  void require_symmetric(const std::string& hint) const;

 private:
  std::int64_t n_ = 0, cols_ = 0, nnz_ = 0;
  DType dtype_ = DType::f64;
  OperatorFormat format_;
  std::optional<DoubleMatrix> dense_;  // format=dense
  const std::int32_t* ptr_ = nullptr;
  const std::int32_t* col_ = nullptr;
  const double* val_ = nullptr;
  std::vector<double> copy_;  // f32 values as double
  eigen::LinearOperator op_;
};

}  // namespace ymlopt::eigen_util
