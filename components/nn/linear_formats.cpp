#include "nn/linear_formats.hpp"

#include <algorithm>
#include <ymlopt/content_cache.hpp>

#include "quant/bf16_linear.hpp"
#include "quant/qlinear.hpp"
#include "sparse/sparse_linear.hpp"
#include <ymlopt/kernel_util.hpp>

namespace ymlopt::nn {
namespace {

using std::int64_t;
using std::to_string;

std::string rc(int64_t r, int64_t c) { return to_string(r) + "x" + to_string(c); }

/// "" when port i has dtype d.
std::string want_dtype(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i, DType d,
                       const char* why) {
  if (p[i].dtype == d) return "";
  return "port '" + s[i].name + "' has dtype " + dtype_name(p[i].dtype) + " but format needs " + dtype_name(d) +
         " (" + why + ")";
}

std::string want_bound(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                       WeightFormat f) {
  if (p[i].bound()) return "";
  return "port '" + s[i].name + "' is not bound: format=" + weight_format_name(f) + " needs it";
}

std::string want_unbound(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i,
                         WeightFormat f) {
  if (!p[i].bound()) return "";
  return "port '" + s[i].name + "' is bound but format=" + weight_format_name(f) + " does not use it";
}

/// "" when port i is rows x cols, or a vector of rows elements when cols == 1 and vector_ok.
std::string want_shape(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i, int64_t rows,
                       int64_t cols, const std::string& why) {
  const TensorView& v = p[i];
  if (v.rows == rows && v.cols == cols) return "";
  if (rows == 1 || cols == 1) {  // vectors are 1 x len views
    const int64_t len = rows * cols;
    if (v.rows * v.cols == len && (v.rows == 1 || v.cols == 1)) return "";
  }
  return "port '" + s[i].name + "' is " + kutil::dims(v) + " but expected " + rc(rows, cols) + " (" + why + ")";
}

quant::QWeight qweight(std::span<const TensorView> p, WeightFormat f, const Args& a, int64_t n, int64_t k) {
  quant::QWeight w = quant::QWeight::of(f == WeightFormat::int4 ? 4 : 8, p[kW], p[kWScale], p[kWZero], n, k,
                                        a.get_int("group"));
  if (!a.get_bool("keep_panels")) w.q_id = w.scale_id = 0;  // unnamed: packed per call, nothing kept
  return w;
}

/// Row-pointer array of `rows` entries + 1 indexing `count` entries: monotone and in range.
void validate_row_ptr(const std::int32_t* ptr, int64_t rows, int64_t count, const char* what) {
  if (ptr[0] < 0) throw KernelError(std::string(what) + "[0] is " + to_string(ptr[0]) + ": must be >= 0");
  for (int64_t i = 0; i < rows; ++i)
    if (ptr[i + 1] < ptr[i])
      throw KernelError(std::string(what) + " decreases at row " + to_string(i) + " (" + to_string(ptr[i]) +
                        " then " + to_string(ptr[i + 1]) + ")");
  if (ptr[rows] > count)
    throw KernelError(std::string(what) + "[" + to_string(rows) + "] is " + to_string(ptr[rows]) +
                      " but only " + to_string(count) + " entries are stored");
}

void validate_index(const std::int32_t* idx, int64_t begin, int64_t end, int64_t limit, const char* what) {
  for (int64_t i = begin; i < end; ++i)
    if (idx[i] < 0 || idx[i] >= limit)
      throw KernelError(std::string(what) + "[" + to_string(i) + "] is " + to_string(idx[i]) +
                        ": out of range [0, " + to_string(limit) + ")");
}

/// A CSR weight's GEMV plan is kept under the content ids of its three arrays.
struct PlanKey {
  std::uint64_t w, index, ptr;
  int64_t n, k;
  bool operator==(const PlanKey&) const = default;
};
struct PlanKeyHash {
  std::size_t operator()(const PlanKey& k) const {
    return hash_fields(k.w, k.index, k.ptr, k.n, k.k);
  }
};
using PlanCache = ContentCache<PlanKey, sparse::CsrPlan, PlanKeyHash>;
PlanCache& plan_cache() {
  static PlanCache c(cache_budget_from_env("YMLOPT_SPARSE_PLAN_CACHE_MB", 256));
  return c;
}

}  // namespace

ContentCacheStats csr_plan_cache_stats() { return plan_cache().stats(); }

std::string csr_gemv_description() {
  const std::int64_t budget = plan_cache().budget();
  return budget > 0 ? "GEMV plans kept per weight (cache " + to_string(budget >> 20) + " MiB)"
                    : "gathering GEMV (plans off: YMLOPT_SPARSE_PLAN_CACHE_MB=0)";
}

bool keeps_csr_plan(std::int64_t m) { return m < sparse::kCsrPlanMaxM && plan_cache().budget() > 0; }

std::optional<WeightFormat> parse_weight_format(std::string_view s) {
  if (s == "dense") return WeightFormat::dense;
  if (s == "int8") return WeightFormat::int8;
  if (s == "int4") return WeightFormat::int4;
  if (s == "csr") return WeightFormat::csr;
  if (s == "bsr") return WeightFormat::bsr;
  if (s == "nm24") return WeightFormat::nm24;
  if (s == "bf16") return WeightFormat::bf16;
  return std::nullopt;
}

const char* weight_format_name(WeightFormat f) {
  switch (f) {
    case WeightFormat::dense: return "dense";
    case WeightFormat::int8: return "int8";
    case WeightFormat::int4: return "int4";
    case WeightFormat::csr: return "csr";
    case WeightFormat::bsr: return "bsr";
    case WeightFormat::nm24: return "nm24";
    case WeightFormat::bf16: return "bf16";
  }
  return "?";
}

std::string check_compressed_weight(const std::vector<PortSpec>& s, std::span<const TensorView> p, const Args& a,
                                    WeightFormat f, int64_t n, int64_t k) {
  if (p[kX].dtype != DType::f32)
    return "port 'x' has dtype " + std::string(dtype_name(p[kX].dtype)) + ": format=" + weight_format_name(f) +
           " needs f32 activations";
  switch (f) {
    case WeightFormat::dense: return "";
    case WeightFormat::bf16:
      return kutil::first_error({want_dtype(s, p, kW, DType::bf16, "bf16 weights"),
                                 want_shape(s, p, kW, n, k, "format=bf16: w is [n, k] with n = y columns, k = x columns"),
                                 want_unbound(s, p, kWScale, f), want_unbound(s, p, kWZero, f),
                                 want_unbound(s, p, kWIndex, f), want_unbound(s, p, kWPtr, f)});
    case WeightFormat::int8:
    case WeightFormat::int4: {
      const bool four = f == WeightFormat::int4;
      const int64_t group = a.get_int("group");
      if (group < 0) return "param 'group' is " + to_string(group) + ": must be >= 0 (0: one scale per row)";
      if (group > 0 && k % group != 0)
        return "param 'group' is " + to_string(group) + " but x has " + to_string(k) +
               " columns: groups must tile the rows of w";
      if (four && k % 2 != 0) return "x has " + to_string(k) + " columns: format=int4 needs an even count";
      const int64_t g = group > 0 ? k / group : 1;
      const std::string layout = std::string("format=") + weight_format_name(f) + ": w is [n, " +
                                 (four ? "k/2" : "k") + "] with n = y columns, k = x columns";
      const DType sd = p[kWScale].dtype;
      return kutil::first_error({want_dtype(s, p, kW, DType::i8, four ? "two 4-bit codes per byte" : "int8 codes"),
                    want_shape(s, p, kW, n, four ? k / 2 : k, layout), want_bound(s, p, kWScale, f),
                    (sd == DType::f32 || sd == DType::f16)
                        ? std::string()
                        : "port 'w_scale' has dtype " + std::string(dtype_name(sd)) + ": expected f32 or f16",
                    want_shape(s, p, kWScale, n, g, group > 0 ? "one scale per row and group" : "one scale per row"),
                    p[kWZero].bound() && p[kWZero].dtype != DType::f32 && p[kWZero].dtype != DType::f16
                        ? "port 'w_zero' has dtype " + std::string(dtype_name(p[kWZero].dtype)) +
                              ": expected f32 or f16 (zero points)"
                        : std::string(),
                    p[kWZero].bound() ? want_shape(s, p, kWZero, n, g, "one zero point per scale") : "",
                    want_unbound(s, p, kWIndex, f), want_unbound(s, p, kWPtr, f)});
    }
    case WeightFormat::csr: {
      const int64_t nnz = p[kW].rows * p[kW].cols;
      return kutil::first_error({want_dtype(s, p, kW, DType::f32, "nonzero values"),
                    p[kW].rows == 1 ? "" : "port 'w' is " + kutil::dims(p[kW]) + " but format=csr needs a vector of nonzeros",
                    want_bound(s, p, kWIndex, f), want_dtype(s, p, kWIndex, DType::i32, "column indices"),
                    want_shape(s, p, kWIndex, 1, nnz, "one column index per nonzero"), want_bound(s, p, kWPtr, f),
                    want_dtype(s, p, kWPtr, DType::i32, "row pointers"),
                    want_shape(s, p, kWPtr, 1, n + 1, "n + 1 row pointers, n = y columns"),
                    want_unbound(s, p, kWScale, f), want_unbound(s, p, kWZero, f)});
    }
    case WeightFormat::bsr: {
      const int64_t bs = a.get_int("block");
      if (bs < 1) return "param 'block' is " + to_string(bs) + ": format=bsr needs the block size (>= 1)";
      if (n % bs != 0 || k % bs != 0)
        return "format=bsr with block=" + to_string(bs) + " needs n and k multiples of it (n=" + to_string(n) +
               ", k=" + to_string(k) + ")";
      return kutil::first_error({want_dtype(s, p, kW, DType::f32, "block values"),
                    p[kW].cols == bs * bs ? "" : "port 'w' is " + kutil::dims(p[kW]) + " but expected [blocks, " +
                                                    to_string(bs * bs) + "] (one row per " + rc(bs, bs) + " block)",
                    want_bound(s, p, kWIndex, f), want_dtype(s, p, kWIndex, DType::i32, "block columns"),
                    want_shape(s, p, kWIndex, 1, p[kW].rows, "one block column per block"),
                    want_bound(s, p, kWPtr, f), want_dtype(s, p, kWPtr, DType::i32, "block row pointers"),
                    want_shape(s, p, kWPtr, 1, n / bs + 1, "n/block + 1 block row pointers"),
                    want_unbound(s, p, kWScale, f), want_unbound(s, p, kWZero, f)});
    }
    case WeightFormat::nm24: {
      if (k % 8 != 0) return "x has " + to_string(k) + " columns: format=nm24 needs a multiple of 8";
      return kutil::first_error({want_dtype(s, p, kW, DType::f32, "kept values"),
                    want_shape(s, p, kW, n, k / 2, "format=nm24: two kept values per group of 4"),
                    want_bound(s, p, kWIndex, f), want_dtype(s, p, kWIndex, DType::i8, "2-bit positions"),
                    want_shape(s, p, kWIndex, n, k / 8, "two 4-bit group descriptors per byte"),
                    want_unbound(s, p, kWScale, f), want_unbound(s, p, kWZero, f), want_unbound(s, p, kWPtr, f)});
    }
  }
  return "";
}

double compressed_flops(std::span<const TensorView> p, WeightFormat f, int64_t m, int64_t n, int64_t k) {
  const double md = static_cast<double>(m);
  switch (f) {
    case WeightFormat::csr: return 2 * md * static_cast<double>(p[kW].cols);
    case WeightFormat::bsr: return 2 * md * static_cast<double>(p[kW].rows * p[kW].cols);
    case WeightFormat::nm24: return md * static_cast<double>(n) * static_cast<double>(k);
    default: return 2 * md * static_cast<double>(n) * static_cast<double>(k);
  }
}

void compressed_product(std::span<const TensorView> p, const Args& a, WeightFormat f, const float* x, int64_t m,
                        int64_t ldx, float* y, int64_t ldy) {
  const int64_t n = p[kY].cols, k = p[kX].cols;
  switch (f) {
    case WeightFormat::dense: throw KernelError("dense weights take the GEMM path");
    case WeightFormat::bf16:
      quant::linear_bf16(x, m, ldx, static_cast<const std::uint16_t*>(p[kW].data), n, k, std::max<int64_t>(p[kW].ld, k), y, ldy);
      return;
    case WeightFormat::int8:
    case WeightFormat::int4:
      if (a.get_string("activations") == "f32")
        quant::linear_weight_only(x, m, ldx, qweight(p, f, a, n, k), y, ldy);
      else
        quant::linear(x, m, ldx, qweight(p, f, a, n, k), y, ldy, quant::Isa::best,
                      x == p[kX].data ? p[kX].content_id : 0);
      return;
    case WeightFormat::csr: {
      const auto* ptr = static_cast<const std::int32_t*>(p[kWPtr].data);
      const auto* col = static_cast<const std::int32_t*>(p[kWIndex].data);
      const int64_t nnz = p[kW].cols;
      const sparse::CsrWeight w{static_cast<const float*>(p[kW].data), col, ptr, n, k};
      auto validate = [&] {
        validate_row_ptr(ptr, n, nnz, "w_ptr");
        validate_index(col, ptr[0], ptr[n], k, "w_index");
      };
      // A few tokens with a named weight: the GEMV runs on a plan built once for
      // these contents (validated then, so not again per call).
      const std::uint64_t ids[3] = {p[kW].content_id, p[kWIndex].content_id, p[kWPtr].content_id};
      if (m < sparse::kCsrPlanMaxM && ids[0] && ids[1] && ids[2]) {
        const PlanKey key{ids[0], ids[1], ids[2], n, k};
        if (const auto plan = plan_cache().get(
                key, ids[0] >> 32,
                [&] {
                  validate();
                  return sparse::plan_gemv_bytes(w);
                },
                [&](sparse::CsrPlan& pl) { pl = sparse::plan_gemv(w); })) {
          sparse::linear(x, m, ldx, w, y, ldy, plan.get());
          return;
        }
      }
      validate();
      sparse::linear(x, m, ldx, w, y, ldy);
      return;
    }
    case WeightFormat::bsr: {
      const int64_t bs = a.get_int("block");
      const auto* ptr = static_cast<const std::int32_t*>(p[kWPtr].data);
      const auto* col = static_cast<const std::int32_t*>(p[kWIndex].data);
      validate_row_ptr(ptr, n / bs, p[kW].rows, "w_ptr");
      validate_index(col, ptr[0], ptr[n / bs], k / bs, "w_index");
      sparse::BsrWeight w{static_cast<const float*>(p[kW].data), col, ptr, n, k, bs};
      sparse::linear(x, m, ldx, w, y, ldy);
      return;
    }
    case WeightFormat::nm24: {
      sparse::Nm24Weight w{static_cast<const float*>(p[kW].data), p[kW].ld,
                           static_cast<const std::uint8_t*>(p[kWIndex].data), p[kWIndex].rows > 1 ? p[kWIndex].ld : k / 8,
                           n, k};
      sparse::linear(x, m, ldx, w, y, ldy);
      return;
    }
  }
}

}  // namespace ymlopt::nn
