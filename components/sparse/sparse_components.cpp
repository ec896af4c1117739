// sparse.pack_nm24 / sparse.unpack_nm24: dense W [n, k] <-> the 2:4 compressed
// form of sparse_linear.hpp (values f32 [n, k/2], index i8 [n, k/8], one
// nibble per group of 4: bits 0-1 first kept position, bits 2-3 second).
//
//   <task component="sparse.pack_nm24">
//     <in port="w" data="W"/> <out port="values" data="V"/> <out port="index" data="I"/>
//   </task>
//   <task component="sparse.unpack_nm24">
//     <in port="values" data="V"/> <in port="index" data="I"/> <out port="w" data="W2"/>
//   </task>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "sparse/sparse.hpp"
#include "sparse/sparse_linear.hpp"
#include <ymlopt/kernel_util.hpp>

namespace ymlopt {
namespace {

using kutil::dims;
using std::int64_t;
using std::to_string;

const std::vector<PortSpec>& pack_ports() {
  static const std::vector<PortSpec> p = {
      {"w", Access::read, {DType::f32}, false, 2, "dense W [n, k], at most 2 nonzeros per group of 4 along k"},
      {"values", Access::write, {DType::f32}, false, 2, "kept values [n, k/2], two per group"},
      {"index", Access::write, {DType::i8}, false, 2, "kept positions [n, k/8], a nibble per group"},
  };
  return p;
}

const std::vector<PortSpec>& unpack_ports() {
  static const std::vector<PortSpec> p = {
      {"values", Access::read, {DType::f32}, false, 2, "kept values [n, k/2]"},
      {"index", Access::read, {DType::i8}, false, 2, "kept positions [n, k/8]"},
      {"w", Access::write, {DType::f32}, false, 2, "dense W [n, k], zeros outside the kept positions"},
  };
  return p;
}

/// "" when W (k columns) and its packed ports agree; `wi`, `vi`, `ii` are port indices.
std::string nm24_shapes(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t wi, std::size_t vi,
                        std::size_t ii) {
  const int64_t n = p[wi].rows, k = p[wi].cols;
  if (k % 8)
    return "port '" + s[wi].name + "' is " + dims(p[wi]) + ": k = " + to_string(k) +
           " must be a multiple of 8 for 2:4 packing (two groups of 4 per index byte)";
  if (p[vi].rows != n || p[vi].cols != k / 2)
    return "port '" + s[vi].name + "' is " + dims(p[vi]) + " but expected " + to_string(n) + "x" + to_string(k / 2) +
           " (rows of w x k/2)";
  if (p[ii].rows != n || p[ii].cols != k / 8)
    return "port '" + s[ii].name + "' is " + dims(p[ii]) + " but expected " + to_string(n) + "x" + to_string(k / 8) +
           " (rows of w x k/8)";
  return "";
}

std::string pack_check(const TaskShape& t) {
  const auto& s = pack_ports();
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  return nm24_shapes(s, t.ports, 0, 1, 2);
}

std::string unpack_check(const TaskShape& t) {
  const auto& s = unpack_ports();
  if (auto m = kutil::ports_present(s, t.ports); !m.empty()) return m;
  const auto& p = t.ports;
  if (p[0].cols * 2 != p[2].cols || p[0].rows != p[2].rows)
    return "port 'values' is " + dims(p[0]) + " but port 'w' is " + dims(p[2]) + ": values must be [n, k/2]";
  return nm24_shapes(s, p, 2, 0, 1);
}

Cost pack_cost(const TaskShape& t) { return kutil::io_cost(pack_ports(), t, 0); }
Cost unpack_cost(const TaskShape& t) { return kutil::io_cost(unpack_ports(), t, 0); }

void pack_cpu(KernelContext& ctx) {
  kutil::validate(ctx, pack_ports(), pack_check);
  const TensorView &w = ctx.port(0), &v = ctx.port(1), &ix = ctx.port(2);
  const int64_t n = w.rows, k = w.cols;
  sparse::Nm24 z;
  try {
    z = sparse::to_nm24(static_cast<const float*>(w.data), n, k, w.ld);
  } catch (const std::invalid_argument& e) {
    throw KernelError(std::string("sparse.pack_nm24: port 'w' ") + (e.what() + std::strlen("to_nm24: ")));
  }
  for (int64_t r = 0; r < n; ++r) {
    if (k == 0) break;
    std::memcpy(static_cast<float*>(v.data) + r * v.ld, z.values.data() + r * (k / 2),
                static_cast<std::size_t>(k / 2) * sizeof(float));
    std::memcpy(static_cast<std::int8_t*>(ix.data) + r * ix.ld, z.index.data() + r * (k / 8),
                static_cast<std::size_t>(k / 8));
  }
  int64_t kept = 0;
  for (float f : z.values) kept += f != 0.0f;
  ctx.report("nonzeros", static_cast<double>(kept));
}

void unpack_cpu(KernelContext& ctx) {
  kutil::validate(ctx, unpack_ports(), unpack_check);
  const TensorView &v = ctx.port(0), &ix = ctx.port(1), &w = ctx.port(2);
  const int64_t n = w.rows, k = w.cols;
  if (n == 0 || k == 0) return;
  const sparse::Nm24Weight z{static_cast<const float*>(v.data), v.ld, static_cast<const std::uint8_t*>(ix.data),
                             ix.ld, n, k};
  sparse::to_dense(z, static_cast<float*>(w.data), w.ld);
}

}  // namespace

void register_sparse(Registry& reg) {
  kutil::add_component(reg, "sparse.pack_nm24",
                       "2:4 compression of W [n, k] (k a multiple of 8): values [n, k/2] keep the two entries of "
                       "every group of 4 along k, index [n, k/8] their positions (a nibble per group, group 2g in the "
                       "low nibble; bits 0-1 first position, 2-3 second). A group with fewer than 2 nonzeros is "
                       "padded with zeros at its lowest free positions; more than 2 is an error naming row and group.",
                       pack_ports(), {}, pack_cpu, pack_check, pack_cost);
  kutil::add_component(reg, "sparse.unpack_nm24",
                       "inverse of sparse.pack_nm24: W [n, k] with the kept values at their positions, zeros "
                       "elsewhere (a position given twice receives the sum)",
                       unpack_ports(), {}, unpack_cpu, unpack_check, unpack_cost);
}

}  // namespace ymlopt
