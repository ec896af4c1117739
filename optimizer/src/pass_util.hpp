// Helpers the passes share (passes.cpp, rewrite.cpp): running a registered
// component on in-memory tensors, pass options, weight selection, and small
// queries on the task list.
//
//   Buf w = Buf::of(dense.w, n, k), q(DType::i8, n, k), scale(DType::f32, 1, n);
//   run_component(reg, "quant.int8", {{"w", &w}, {"q", &q}, {"scale", &scale}}, {});
#pragma once

#include <optional>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "ymlopt/optimizer/passes.hpp"

namespace ymlopt::opt::detail {

using std::int64_t;

/// Runs a registered component's CPU kernel on in-memory tensors.
class LocalContext final : public KernelContext {
 public:
  LocalContext(std::vector<TensorView> ports, Args args) : ports_(std::move(ports)), args_(std::move(args)) {}
  std::span<const TensorView> ports() const override { return ports_; }
  const Args& args() const override { return args_; }
  void report(std::string key, double value) override { reports[std::move(key)] = value; }
  const std::string& run_dir() const override { return dir_; }
  std::map<std::string, double> reports;

 private:
  std::vector<TensorView> ports_;
  Args args_;
  std::string dir_ = ".";
};

/// An owning tensor for component calls.
struct Buf {
  DType dtype = DType::f32;
  int64_t rows = 0, cols = 0;
  std::vector<std::byte> bytes;
  Buf() = default;
  Buf(DType t, int64_t r, int64_t c) : dtype(t), rows(r), cols(c), bytes(std::size_t(r * c) * dtype_size(t)) {}
  static Buf of(const std::vector<float>& v, int64_t r, int64_t c) {
    Buf b(DType::f32, r, c);
    std::memcpy(b.bytes.data(), v.data(), b.bytes.size());
    return b;
  }
  TensorView view() {
    TensorView v;
    v.data = bytes.data();
    v.dtype = dtype;
    v.rows = rows;
    v.cols = cols;
    v.ld = cols;
    v.shape = rows == 1 ? Shape{cols} : Shape{rows, cols};
    return v;
  }
  std::vector<float> floats() const {
    std::vector<float> v(std::size_t(rows * cols));
    std::memcpy(v.data(), bytes.data(), v.size() * sizeof(float));
    return v;
  }
};


/// Runs component `name` with `ports` (by port name; outputs are allocated by the caller)
/// and args (by name, as text). Throws with the component's own check message.
std::map<std::string, double> run_component(const ComponentRegistry& reg, const std::string& name,
                                            std::map<std::string, Buf*> ports,
                                            const std::map<std::string, std::string>& args);

/// Option `k` of a pass as text / as a number (PassError when not a number).
std::string opt_str(const PassSpec& s, const std::string& k, const std::string& def);
double opt_num(const PassSpec& s, const std::string& k, double def);

/// Option `match` of a pass as a test on a weight's or table's name (true for
/// every name when the option is absent); a bad regex is a PassError.
///   const auto matches = name_matcher(spec);  if (!matches(u.name)) continue;
std::function<bool(const std::string&)> name_matcher(const PassSpec& s);

/// The weights a pass may change, in program order (option `match`: a regex on the name).
std::vector<WeightUse> selected(PassContext& ctx, const PassSpec& s);

template <class T> std::vector<std::byte> vec_bytes(const std::vector<T>& v) {
  std::vector<std::byte> b(v.size() * sizeof(T));
  if (!v.empty()) std::memcpy(b.data(), v.data(), b.size());
  return b;
}


std::vector<int64_t> shape_of(const Buf& b);
NewTensor tensor(const std::string& role, Buf& b);

/// Do two references share elements (same data; whole, or the same tile)?
inline bool overlaps(const DataRef& a, const DataRef& b) {
  return a.data == b.data && (a.tile < 0 || b.tile < 0 || a.tile == b.tile);
}

/// The reference task t binds to `port` (data -1: unbound).
inline const DataRef& bound(const ModelEditor& ed, const TaskNode& t, const char* port) {
  return t.bindings[ed.port_index(t, port)].ref;
}

/// Per data: 1 when a task writes it (any binding not read-only), else 0.
std::vector<char> written_data(const Dag& dag);

/// Does task t touch data d (any binding, whole or tile)?
bool touches(const TaskNode& t, std::int32_t d);

/// Is the value task `from` left in data d read by a task after it (before d is
/// completely overwritten)? Conservative: any later read of d counts.
bool read_later(const Dag& dag, std::size_t from, std::int32_t d);

/// The bindings (task, port) that read the value task `from` left at r:
/// readers and in-place updates of exactly r, up to the next write of r (a
/// task that reads r and writes r anew is the last reader). nullopt when a
/// task reads that value through another view (the whole tensor when r is a tile).
using Uses = std::vector<std::pair<std::size_t, std::size_t>>;
std::optional<Uses> value_users(const Dag& dag, std::size_t from, const DataRef& r);

/// Graph rewrites (rewrite.cpp).
void pass_fuse_merge(PassContext& ctx, const PassSpec& s);
void pass_fuse_compose(PassContext& ctx, const PassSpec& s);
void pass_fuse_activation(PassContext& ctx, const PassSpec& s);
void pass_fuse_ln_affine(PassContext& ctx, const PassSpec& s);
/// fuse.compose and fuse.merge on op.matmul tasks, where the pair's laws hold (op_rules.cpp).
void compose_products(PassContext& ctx, double max_ratio, nlohmann::json& pairs, nlohmann::json& skipped);
void merge_products(PassContext& ctx, std::int64_t min_group, nlohmann::json& groups);
void pass_dce(PassContext& ctx, const PassSpec& s);
/// Structural zeros through the products (zeros.cpp).
void pass_sparse_propagate(PassContext& ctx, const PassSpec& s);
/// Structured pruning (structured.cpp).
void pass_prune_heads(PassContext& ctx, const PassSpec& s);
void pass_prune_neurons(PassContext& ctx, const PassSpec& s);
void check_prune_units(const PassSpec& s);

}  // namespace ymlopt::opt::detail
