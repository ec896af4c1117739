// op.matmul (see op.hpp): ports, checks, cost and the CPU kernel over semiring.hpp.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "op/graph.hpp"
#include "op/op.hpp"
#include "op/semiring.hpp"
#include "sparse/sparse_linear.hpp"
#include <ymlopt/content_cache.hpp>
#include <ymlopt/kernel_util.hpp>

namespace ymlopt {
namespace {

using kutil::dims;
using kutil::first_error;
using std::int64_t;

const std::vector<PortSpec>& matmul_ports() {
  static const std::vector<PortSpec> p = {
      {"a", Access::read, kutil::kFloat, false, 2, "A (m x k, or k x m with transa)"},
      {"b", Access::read, kutil::kFloat, false, 2, "B (k x n, or n x k with transb)"},
      {"c", Access::read_write, kutil::kFloat, false, 2,
       "C (m x n): overwritten, or with accumulate combined with the product by the reduction"},
      {"arg", Access::write, {DType::i32}, true, 2,
       "add max or min: [m, n], the k attaining each entry (first on ties, -1 if none; back-pointers)"},
      {"mask", Access::read, {DType::i8, DType::i32, DType::f32}, true, 2,
       "[m, n] (or one entry per block: mask_block): entries of c computed where nonzero; masked ones get "
       "`masked`, else the reduction's identity (with accumulate: keep c); blocks of 128 x 128 entirely masked "
       "cost nothing"},
  };
  return p;
}

/// The task's `mul` (over a and b) and `map` (over c; none when "") compiled
/// once. Throws KernelError naming the param and the position.
struct Programs {
  op::ElementProgram mul;
  std::optional<op::ElementProgram> map;
  bool generic() const { return mul.canonical().empty(); }
};

Programs compile_programs(const Args& args) {
  Programs p;
  try {
    p.mul = op::ElementProgram::compile(args.get_string("mul"), {"a", "b"});
  } catch (const KernelError& e) {
    throw KernelError(std::string("param 'mul': ") + e.what());
  }
  if (!args.get_string("map").empty()) {
    try {
      p.map = op::ElementProgram::compile(args.get_string("map"), {"c"});
    } catch (const KernelError& e) {
      throw KernelError(std::string("param 'map': ") + e.what());
    }
  }
  return p;
}

/// The value of masked entries: none ("": the identity, or c with
/// accumulate), a number, inf or -inf. Throws KernelError.
std::optional<double> parse_masked(const std::string& t) {
  if (t.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (end == t.c_str() || *end != '\0' || std::isnan(v))
    throw KernelError("param 'masked' is '" + t + "': a number, inf or -inf (or empty: the reduction's identity)");
  return v;
}

struct Dims {
  int64_t m, n, k, kb;
};
Dims dims_of(const TaskShape& t) {
  const TensorView &a = t.ports[0], &b = t.ports[1];
  const bool ta = t.args.get_bool("transa"), tb = t.args.get_bool("transb");
  return {ta ? a.cols : a.rows, tb ? b.rows : b.cols, ta ? a.rows : a.cols, tb ? b.cols : b.rows};
}

std::string matmul_check(const TaskShape& t) {
  const auto& s = matmul_ports();
  const auto& p = t.ports;
  if (auto m = kutil::ports_present(s, p); !m.empty()) return m;
  if (auto m = first_error({kutil::float_dtype(s, p, 0), kutil::same_dtype(s, p, 1, 0), kutil::same_dtype(s, p, 2, 0),
                            kutil::one_of(t.args, "add", {"sum", "max", "min", "logsumexp", "prod"})});
      !m.empty())
    return m;
  Programs prog;
  try {
    prog = compile_programs(t.args);
  } catch (const KernelError& e) {
    return e.what();
  }
  const std::string mul = "param 'mul' is '" + t.args.get_string("mul") + "'";
  if ((prog.generic() || prog.map) && p[0].dtype != DType::f32)
    return mul + ": expressions other than a*b and a+b, and map, run on f32 data (this product is " +
           dtype_name(p[0].dtype) + ")";
  if (prog.generic() && (p[3].bound() || p[4].bound() || t.args.get_bool("skip_zeros")))
    return mul + ": ports arg and mask, and skip_zeros, go with mul a*b or a+b";
  const op::Combine c = prog.mul.canonical() == "a+b" ? op::Combine::add : op::Combine::mul;
  const Dims d = dims_of(t);
  if (d.k != d.kb)
    return "port 'b' is " + dims(p[1]) + " but port 'a' is " + dims(p[0]) + ": inner dimensions differ (" +
           std::to_string(d.k) + " != " + std::to_string(d.kb) + ")";
  if (p[2].rows != d.m || p[2].cols != d.n)
    return "port 'c' is " + dims(p[2]) + " but the product is " + std::to_string(d.m) + "x" + std::to_string(d.n);
  if (t.args.get_bool("skip_zeros") && (c != op::Combine::mul || t.args.get_string("add") != "sum" ||
                                        t.args.get_bool("transa") || t.args.get_bool("transb") || p[3].bound() ||
                                        p[4].bound()))
    return "param 'skip_zeros' is for mul=a*b add=sum without transposes, arg or mask";
  try {
    if (parse_masked(t.args.get_string("masked")) && !p[4].bound()) return "param 'masked' goes with port 'mask'";
  } catch (const KernelError& e) {
    return e.what();
  }
  if (const std::string& nm = t.args.get_string("sparse_b"); !nm.empty()) {
    if (nm != "2:4") return "param 'sparse_b' is '" + nm + "': 2:4 is the pattern with a kernel (or empty: dense)";
    if (c != op::Combine::mul || t.args.get_string("add") != "sum" || prog.generic() || t.args.get_bool("transa") ||
        p[3].bound() || p[4].bound() || t.args.get_bool("skip_zeros") || p[0].dtype != DType::f32)
      return "param 'sparse_b' is for f32 mul=a*b add=sum without transa, arg, mask or skip_zeros";
    if (d.k % 8 != 0)
      return "param 'sparse_b': the inner dimension " + std::to_string(d.k) + " is not a multiple of 8 (2:4 packs "
             "two groups of 4 per index byte)";
  }
  if (p[4].bound()) {
    if (p[3].bound()) return "ports 'arg' and 'mask' do not go together";
    const int64_t bs = t.args.get_int("mask_block");
    if (bs < 0) return "param 'mask_block' is " + std::to_string(bs) + ": a block size, or 0 for an element mask";
    const int64_t mr = bs ? (d.m + bs - 1) / bs : d.m, mc = bs ? (d.n + bs - 1) / bs : d.n;
    if (p[4].rows != mr || p[4].cols != mc)
      return "port 'mask' is " + dims(p[4]) + " but the product is " + std::to_string(d.m) + "x" + std::to_string(d.n) +
             (bs ? " in blocks of " + std::to_string(bs) + ": " + std::to_string(mr) + "x" + std::to_string(mc) : "");
  }
  if (p[3].bound()) {
    const std::string& add = t.args.get_string("add");
    if (add != "max" && add != "min") return "port 'arg' needs add=max or add=min (add is '" + add + "')";
    if (t.args.get_bool("accumulate")) return "port 'arg' is written by a product without accumulate";
    if (p[3].rows != d.m || p[3].cols != d.n)
      return "port 'arg' is " + dims(p[3]) + " but the product is " + std::to_string(d.m) + "x" + std::to_string(d.n);
  }
  return "";
}

Cost matmul_cost(const TaskShape& t) {
  if (t.ports.size() != matmul_ports().size() || matmul_check(t) != "") return {};
  const Dims d = dims_of(t);
  // Two operations per term (⊗ and ⊕); logsumexp's second pass adds an exp (~12) and a subtraction;
  // a 2:4 B holds half the terms.
  const double per = t.args.get_string("add") == "logsumexp" ? 16.0 : t.args.get_string("sparse_b").empty() ? 2.0 : 1.0;
  Cost c = kutil::io_cost(matmul_ports(), t, per * double(d.m) * double(d.n) * double(d.k));
  if (!t.args.get_string("sparse_b").empty()) c.kept_ports = 1u << 1;  // b's 2:4 packing, kept per content
  return c;
}

/// op(B)ᵀ packed 2:4 (values and positions) from B.
sparse::Nm24 pack_nm24(bool tb, std::int64_t n, std::int64_t k, const float* b, std::int64_t ldb) {
  std::vector<float> bt;
  if (!tb) {  // op(B)ᵀ = Bᵀ: [n, k]
    bt.resize(static_cast<std::size_t>(n * k));
    for (std::int64_t kk = 0; kk < k; ++kk)
      for (std::int64_t j = 0; j < n; ++j) bt[static_cast<std::size_t>(j * k + kk)] = b[kk * ldb + j];
  }
  try {
    return sparse::to_nm24(tb ? b : bt.data(), n, k, tb ? ldb : k);
  } catch (const std::invalid_argument& e) {
    throw KernelError(std::string("port 'b' is not 2:4 along k (sparse_b): ") + e.what() +
                      " (a row here is a column of op(b))");
  }
}

/// A named B's packing is kept per content (as nn.linear's packed panels): a model's weights are packed once.
struct PackKey {
  std::uint64_t id;
  std::int64_t n, k;
  bool tb;
  bool operator==(const PackKey&) const = default;
};
struct PackKeyHash {
  std::size_t operator()(const PackKey& p) const { return hash_fields(p.id, p.n, p.k, p.tb); }
};
using PackCache = ContentCache<PackKey, sparse::Nm24, PackKeyHash>;
PackCache& pack_cache() {
  static PackCache c(cache_budget_from_env("YMLOPT_NM24_CACHE_MB", 1024), Eviction::keep);
  return c;
}

/// C (⊕)= A op(B) for a B that is 2:4 along k, on the 2:4 kernel (sparse_linear.hpp): half the multiply-adds.
void nm24_product(bool tb, std::int64_t m, std::int64_t n, std::int64_t k, const float* a, std::int64_t lda,
                  const TensorView& bv, float* c, std::int64_t ldc, bool accumulate) {
  const float* b = bv.ptr<float>();
  const std::int64_t ldb = std::max<std::int64_t>({bv.ld, bv.cols, 1});
  std::shared_ptr<const sparse::Nm24> kept;
  sparse::Nm24 local;
  if (bv.content_id != 0)
    kept = pack_cache().get(
        PackKey{bv.content_id, n, k, tb}, bv.content_id >> 32, [&] { return n * (k / 2) * std::int64_t(sizeof(float)) + n * (k / 8); },  // values, positions
        [&](sparse::Nm24& w) { w = pack_nm24(tb, n, k, b, ldb); });
  if (!kept) local = pack_nm24(tb, n, k, b, ldb);
  const sparse::Nm24Weight w = kept ? kept->view() : local.view();
  if (!accumulate) return sparse::linear(a, m, lda, w, c, ldc);
  std::vector<float> y(static_cast<std::size_t>(m * n));
  sparse::linear(a, m, lda, w, y.data(), n);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) c[i * ldc + j] += y[static_cast<std::size_t>(i * n + j)];
}

void matmul_cpu(KernelContext& ctx) {
  kutil::validate(ctx, matmul_ports(), matmul_check);
  const TensorView &a = ctx.port(0), &b = ctx.port(1), &c = ctx.port(2);
  const bool ta = ctx.arg_bool("transa"), tb = ctx.arg_bool("transb");
  const Programs prog = compile_programs(ctx.args());
  op::Semiring s;
  s.mul = prog.mul.canonical() == "a+b" ? op::Combine::add : op::Combine::mul;
  s.add = op::parse_reduce(ctx.arg_string("add"));
  const int64_t m = c.rows, n = c.cols, k = ta ? a.rows : a.cols;
  auto ld = [](const TensorView& v) { return std::max<int64_t>({v.ld, v.cols, 1}); };
  const TensorView &arg = ctx.port(3), &mask = ctx.port(4);
  kutil::dispatch_float(c.dtype, [&](auto tg) {
    using T = typename decltype(tg)::type;
    if (prog.generic()) {
      if constexpr (std::is_same_v<T, float>)
        op::matmul_program(prog.mul, s.add, ta, tb, m, n, k, a.ptr<T>(), ld(a), b.ptr<T>(), ld(b), c.ptr<T>(), ld(c),
                           ctx.arg_bool("accumulate"));
    } else if (mask.bound()) {
      const int kind = mask.dtype == DType::i8 ? 0 : mask.dtype == DType::i32 ? 1 : 2;
      const op::Mask mk{mask.data, kind, ld(mask), parse_masked(ctx.arg_string("masked")), ctx.arg_int("mask_block")};
      op::matmul_masked(s, ta, tb, m, n, k, a.ptr<T>(), ld(a), b.ptr<T>(), ld(b), c.ptr<T>(), ld(c),
                        ctx.arg_bool("accumulate"), mk);
    } else if (!ctx.arg_string("sparse_b").empty()) {
      if constexpr (std::is_same_v<T, float>)
        nm24_product(tb, m, n, k, a.ptr<T>(), ld(a), b, c.ptr<T>(), ld(c), ctx.arg_bool("accumulate"));
    } else if (ctx.arg_bool("skip_zeros"))
      op::matmul_skip_zeros(m, n, k, a.ptr<T>(), ld(a), b.ptr<T>(), ld(b), c.ptr<T>(), ld(c), ctx.arg_bool("accumulate"));
    else if (arg.bound())
      op::matmul_arg(s, ta, tb, m, n, k, a.ptr<T>(), ld(a), b.ptr<T>(), ld(b), c.ptr<T>(), ld(c),
                     static_cast<std::int32_t*>(arg.data), ld(arg));
    else
      op::matmul(s, ta, tb, m, n, k, a.ptr<T>(), ld(a), b.ptr<T>(), ld(b), c.ptr<T>(), ld(c),
                 ctx.arg_bool("accumulate"));
    if constexpr (std::is_same_v<T, float>)
      if (prog.map) op::apply_map(*prog.map, m, n, c.ptr<T>(), ld(c));
  });
}

const std::vector<PortSpec>& mask_ports() {
  static const std::vector<PortSpec> p = {
      {"mask", Access::write, {DType::i8}, false, 2, "[m, n]: 1 where an entry is kept, 0 where masked"}};
  return p;
}

std::string mask_check(const TaskShape& t) {
  if (auto m = kutil::ports_present(mask_ports(), t.ports); !m.empty()) return m;
  if (auto m = kutil::one_of(t.args, "pattern", {"causal", "band"}); !m.empty()) return m;
  if (t.args.get_string("pattern") == "band" && t.args.get_int("width") < 0)
    return "param 'width' is " + std::to_string(t.args.get_int("width")) + ": the band's half-width is >= 0";
  return "";
}

/// op.mask: causal keeps j <= i + offset (row i is position offset + i of a
/// sequence whose keys start at 0); band keeps |i + offset - j| <= width.
void mask_cpu(KernelContext& ctx) {
  kutil::validate(ctx, mask_ports(), mask_check);
  const TensorView& mk = ctx.port(0);
  const bool causal = ctx.arg_string("pattern") == "causal";
  const int64_t off = ctx.arg_int("offset"), w = ctx.arg_int("width");
  const int64_t ldm = std::max<int64_t>({mk.ld, mk.cols, 1});
  auto* out = static_cast<std::int8_t*>(mk.data);
  for (int64_t i = 0; i < mk.rows; ++i)
    for (int64_t j = 0; j < mk.cols; ++j) {
      const int64_t d = i + off - j;  // how far key j lies behind query i
      out[i * ldm + j] = causal ? d >= 0 : (d <= w && d >= -w);
    }
}

Cost mask_cost(const TaskShape& t) { return kutil::io_cost(mask_ports(), t, 0.0); }

}  // namespace

void register_op(Registry& reg) {
  kutil::add_component(
      reg, "op.matmul",
      "a generalised matrix product: c[i,j] = map(reduce_k mul(a[i,k], b[k,j])) with mul an expression over a and "
      "b and reduce sum, max, min, logsumexp (log Σ exp) or prod, optional transposes; accumulate combines the "
      "product with c by the reduction; with max or min, port arg takes the k attaining each entry (back-pointers); "
      "port mask skips the masked entries' work (a causal mask: half; per block with mask_block). (sum, a*b) is the "
      "GEMM (OpenBLAS, as nn.linear); the others run AVX-512, AVX2 or scalar kernels (f32) chosen at run time, "
      "NaN-propagating",
      matmul_ports(),
      {{"mul", ParamType::string_, "a*b", false,
        "the multiply, an expression over a and b: a*b and a+b run the fast kernels; any other (numbers, + - * /, "
        "exp log abs sqrt tanh erf relu max min, f32) runs compiled once per task over blocks of 64 columns"},
       {"add", ParamType::string_, "sum", false, "the reduction: sum, max, min, logsumexp or prod"},
       {"transa", ParamType::bool_, "false", false, "use Aᵀ"},
       {"transb", ParamType::bool_, "false", false, "use Bᵀ"},
       {"accumulate", ParamType::bool_, "false", false, "c = reduce(c, product) instead of c = product"},
       {"map", ParamType::string_, "", false, "an expression over c applied to the result (f32; \"\": none)"},
       {"sparse_b", ParamType::string_, "", false,
        "2:4: op(b) holds at most 2 nonzeros in each group of 4 along k (N:M pruning, prune.nm); the product "
        "skips the zeros on the 2:4 kernel (sum, a*b; k a multiple of 8; a b that is not 2:4 is an error naming "
        "the group); \"\": dense"},
       {"mask_block", ParamType::int_, "0", false,
        "0: port mask has an entry per entry of c; b > 0: one per b x b block of c ([ceil(m/b), ceil(n/b)], a "
        "block-sparse pattern: masked blocks cost nothing)"},
       {"masked", ParamType::string_, "", false,
        "with port mask, the value of masked entries: a number, inf or -inf (-inf: attention scores a softmax "
        "ignores); \"\": the reduction's identity, or c's value with accumulate"},
       {"skip_zeros", ParamType::bool_, "false", false,
        "(sum, a*b): skip A's zeros (A gathered row by row into CSR): for an A that is mostly zero, as a ReLU's "
        "output"}},
      matmul_cpu, matmul_check, matmul_cost);
  kutil::add_component(
      reg, "op.mask",
      "an output mask for op.matmul's port mask: causal (query i sees keys j <= i + offset) or band (|i + offset - "
      "j| <= width)",
      mask_ports(),
      {{"pattern", ParamType::string_, "causal", false, "causal or band"},
       {"offset", ParamType::int_, "0", false, "the position of row 0 among the keys (a decode step's past length)"},
       {"width", ParamType::int_, "0", false, "band: the half-width"}},
      mask_cpu, mask_check, mask_cost);
  register_op_graph(reg);
}

}  // namespace ymlopt
