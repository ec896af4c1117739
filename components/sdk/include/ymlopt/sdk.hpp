// ymlopt component SDK: everything a component (built-in or plugin) needs.
//
// A component is a named operator with typed ports and parameters, a CPU
// kernel (required), optional CUDA and OpenCL kernels and a cost function. It is
// registered explicitly into a Registry:
//
//   void my_scale(ymlopt::KernelContext& ctx) {
//     auto x = ctx.port(0);                       // inout port 'x'
//     const float a = float(ctx.arg_float("alpha"));
//     for (int64_t r = 0; r < x.rows; ++r)
//       for (int64_t c = 0; c < x.cols; ++c) x.at<float>(r, c) *= a;
//   }
//   void register_mine(ymlopt::Registry& reg) {
//     ymlopt::ComponentSpec s;
//     s.name = "mine.scale";
//     s.ports = {{"x", ymlopt::Access::read_write, {ymlopt::DType::f32}}};
//     s.params = {{"alpha", ymlopt::ParamType::float_, "1"}};
//     s.cpu = my_scale;
//     reg.add(std::move(s));
//   }
//
// This header is self-contained (no link dependency) so that out-of-tree
// plugins only need `find_package(ymlopt)` and `target_link_libraries(p
// ymlopt::sdk)`; see examples/plugin.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ymlopt {

/// Version of the plugin ABI. A plugin built against another version is refused.
/// 2: KernelContext::cuda_stream() and ComponentSpec::cuda_check.
/// 3: TensorView::content_id and Cost::kept_ports.
/// 4: ComponentSpec::compressed and ComponentSpec::rate (the engine reads
///    compressed weights and prices tasks through the components' hooks).
/// 5: ComponentSpec::opencl and opencl_check, KernelContext::opencl_queue()
///    and opencl_offset() (OpenCL kernels, run by StarPU's OpenCL workers).
inline constexpr int kSdkAbiVersion = 5;

enum class DType : std::uint8_t { f32, f64, f16, bf16, i8, i32 };

inline constexpr std::size_t dtype_size(DType t) {
  switch (t) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::f16: return 2;
    case DType::bf16: return 2;
    case DType::i8: return 1;
    case DType::i32: return 4;
  }
  return 0;
}

inline constexpr const char* dtype_name(DType t) {
  switch (t) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
    case DType::i32: return "i32";
  }
  return "?";
}

inline std::optional<DType> parse_dtype(std::string_view s) {
  for (DType t : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i8, DType::i32})
    if (s == dtype_name(t)) return t;
  return std::nullopt;
}

template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<float>() { return DType::f32; }
template <> constexpr DType dtype_of<double>() { return DType::f64; }
template <> constexpr DType dtype_of<std::int8_t>() { return DType::i8; }
template <> constexpr DType dtype_of<std::int32_t>() { return DType::i32; }

/// How a task accesses a port's data; drives dependency inference.
enum class Access : std::uint8_t { read, write, read_write };

inline constexpr const char* access_name(Access a) {
  switch (a) {
    case Access::read: return "in";
    case Access::write: return "out";
    case Access::read_write: return "inout";
  }
  return "?";
}

/// Error raised by a kernel; the run is cancelled and the task, component and
/// XML line are reported.
struct KernelError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// A tensor shape of rank <= 8, stored inline (no allocation), with the parts
/// of std::vector's interface kernels use.
///
///   Shape s{2, 3, 4};  s.size() == 3;  s[2] == 4;  std::vector<int64_t> v = s;
class Shape {
 public:
  static constexpr std::size_t kMaxRank = 8;
  Shape() = default;
  Shape(std::initializer_list<std::int64_t> dims) { assign(dims.begin(), dims.end()); }
  Shape(const std::vector<std::int64_t>& dims) { assign(dims.begin(), dims.end()); }  // NOLINT: implicit by design
  operator std::vector<std::int64_t>() const { return {begin(), end()}; }            // NOLINT
  std::size_t size() const { return n_; }
  bool empty() const { return n_ == 0; }
  std::int64_t operator[](std::size_t i) const { return d_[i]; }
  std::int64_t& operator[](std::size_t i) { return d_[i]; }
  std::int64_t back() const { return d_[n_ - 1]; }
  const std::int64_t* begin() const { return d_; }
  const std::int64_t* end() const { return d_ + n_; }
  void push_back(std::int64_t v) {
    if (n_ == kMaxRank) throw std::length_error("tensor rank above 8");
    d_[n_++] = v;
  }
  void clear() { n_ = 0; }
  std::int64_t numel() const {
    std::int64_t p = 1;
    for (std::size_t i = 0; i < n_; ++i) p *= d_[i];
    return p;
  }
  friend bool operator==(const Shape& a, const Shape& b) {
    if (a.n_ != b.n_) return false;
    for (std::size_t i = 0; i < a.n_; ++i)
      if (a.d_[i] != b.d_[i]) return false;
    return true;
  }

 private:
  template <class It> void assign(It b, It e) {
    n_ = 0;
    for (; b != e; ++b) push_back(*b);
  }
  std::int64_t d_[kMaxRank] = {};
  std::size_t n_ = 0;
};

/// A row-major 2-D strided view on a tensor or on one of its tiles. Tensors of
/// rank > 2 are seen as (product of leading dims) x (last dim); rank 1 as 1 x n.
///
///   TensorView v = ctx.port(0);
///   float s = 0; for (int64_t r = 0; r < v.rows; ++r) s += v.at<float>(r, 0);
struct TensorView {
  void* data = nullptr;  // null for an unbound optional port or at check time
  DType dtype = DType::f32;
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::int64_t ld = 0;  // elements between the starts of two rows (>= cols)
  Shape shape;  // logical shape (the tile's for a tile)
  // Nonzero on a read-only port whose contents the engine can name: every view
  // with the same id, in any task of this process, holds the same values (one
  // version of one tensor or tile: no write between). A kernel may cache what
  // it derives from the data under it (blas.gemm keeps packed f64 panels). 0:
  // unknown (written ports, runtime loops and co-methods, views made by hand).
  std::uint64_t content_id = 0;

  bool bound() const { return rows > 0 || cols > 0 || data != nullptr; }
  std::int64_t size() const { return rows * cols; }
  bool contiguous() const { return ld == cols || rows <= 1; }
  template <class T> T* ptr() const {
    if (dtype_of<T>() != dtype)
      throw KernelError(std::string("port has dtype ") + dtype_name(dtype));
    return static_cast<T*>(data);
  }
  template <class T> T& at(std::int64_t r, std::int64_t c) const {
    return static_cast<T*>(data)[r * ld + c];
  }
};

enum class ParamType : std::uint8_t { int_, float_, bool_, string_ };

inline constexpr const char* param_type_name(ParamType t) {
  switch (t) {
    case ParamType::int_: return "int";
    case ParamType::float_: return "float";
    case ParamType::bool_: return "bool";
    case ParamType::string_: return "string";
  }
  return "?";
}

/// A port: name, access mode, accepted dtypes (empty = any), rank bounds.
struct PortSpec {
  std::string name;
  Access access = Access::read;
  std::vector<DType> dtypes;  // empty: any dtype
  bool optional = false;
  int max_rank = 8;
  std::string doc;
};

/// A scalar parameter; `required` ones have no default.
struct ParamSpec {
  std::string name;
  ParamType type = ParamType::float_;
  std::string default_value;
  bool required = false;
  std::string doc;
};

/// A parameter value after `${}` expansion and type checking.
struct ArgValue {
  double number = 0;
  std::string text;
};

/// Cost of one task, used by reports (GFLOP/s) and as a performance-model hint.
struct Cost {
  double flops = 0;
  double bytes = 0;        // bytes read + written
  double extra_bytes = 0;  // temporary memory
  // Bit p set: the kernel keeps a copy of port p's data (as many bytes) for
  // the rest of the run, under the port's TensorView::content_id, so tasks
  // reading the same content share it (blas.gemm's packed f64 panels). The
  // performance model counts each content once.
  std::uint32_t kept_ports = 0;
};

/// Arguments of one task, in the order of the component's ParamSpecs.
class Args {
 public:
  Args() = default;
  Args(const std::vector<ParamSpec>* specs, std::vector<ArgValue> values)
      : specs_(specs), values_(std::move(values)) {}
  const ArgValue& get(std::string_view name) const {
    for (std::size_t i = 0; specs_ && i < specs_->size(); ++i)
      if ((*specs_)[i].name == name) return values_[i];
    throw KernelError("no parameter '" + std::string(name) + "'");
  }
  double get_float(std::string_view n) const { return get(n).number; }
  std::int64_t get_int(std::string_view n) const { return static_cast<std::int64_t>(get(n).number); }
  bool get_bool(std::string_view n) const { return get(n).number != 0; }
  const std::string& get_string(std::string_view n) const { return get(n).text; }
  const std::vector<ArgValue>& values() const { return values_; }

 private:
  const std::vector<ParamSpec>* specs_ = nullptr;
  std::vector<ArgValue> values_;
};

/// What a kernel sees: its ports (in ComponentSpec::ports order), its args,
/// and a sink for scalar results that go to report.json.
class KernelContext {
 public:
  virtual ~KernelContext() = default;
  /// All port views, in ComponentSpec::ports order (unbound optional ports: no data).
  virtual std::span<const TensorView> ports() const = 0;
  std::size_t num_ports() const { return ports().size(); }
  const TensorView& port(std::size_t i) const {
    if (i >= ports().size()) throw KernelError("port index " + std::to_string(i) + " out of range");
    return ports()[i];
  }
  virtual const Args& args() const = 0;
  /// Record a named scalar result of this task (e.g. a norm or an error).
  /// `idle` = 1 from a co-method's task says the co-method only waits for the
  /// others' results: under <unite mapping="fair"> it then holds no one back.
  virtual void report(std::string key, double value) = 0;
  /// The run directory (relative paths of io components resolve against it).
  virtual const std::string& run_dir() const = 0;
  /// For a CUDA kernel (ComponentSpec::cuda): the cudaStream_t to launch on
  /// (StarPU's starpu_cuda_get_local_stream()); port data are then device
  /// pointers. nullptr: the default stream (and always for CPU kernels).
  ///   ymlopt::nn::cuda::softmax_rows(x, y, rows, cols, ctx.cuda_stream());
  virtual void* cuda_stream() const { return nullptr; }
  /// For an OpenCL kernel (ComponentSpec::opencl): the cl_command_queue to
  /// enqueue on (StarPU's starpu_opencl_get_current_queue()); port data are
  /// then cl_mem buffers, element (0, 0) of port i opencl_offset(i) bytes into
  /// its buffer. The kernel enqueues and returns; whoever runs it waits for the
  /// queue. nullptr for CPU and CUDA kernels.
  ///   auto q = static_cast<cl_command_queue>(ctx.opencl_queue());
  ///   auto x = static_cast<cl_mem>(ctx.port(0).data);
  virtual void* opencl_queue() const { return nullptr; }
  virtual std::size_t opencl_offset(std::size_t /*port*/) const { return 0; }
  /// For a task of a co-method of a top-level <unite> under StarPU-MPI: how
  /// many of that unite's co-methods that run on other ranks are at work (not
  /// finished, and their last part not all `idle`); -1 when none runs
  /// elsewhere (one process, or not a co-method's task). A co-method waiting
  /// for the others' results sees those of its own process by itself.
  ///   if (nothing_left && ctx.remote_peers_at_work() <= 0) stop();
  virtual int remote_peers_at_work() const { return -1; }

  double arg_float(std::string_view n) const { return args().get_float(n); }
  std::int64_t arg_int(std::string_view n) const { return args().get_int(n); }
  bool arg_bool(std::string_view n) const { return args().get_bool(n); }
  const std::string& arg_string(std::string_view n) const { return args().get_string(n); }
};

using KernelFn = void (*)(KernelContext&);

/// Compile-time view of a task for `check` and `cost`: views without data.
struct TaskShape {
  std::span<const TensorView> ports;
  const Args& args;
};

/// Which calibrated figure prices a task (TaskRate::kind).
enum class RateKind : std::uint8_t {
  gemm,       // the calibrated GEMM rate ("sgemm", "dgemm") at the product shape
  kernel,     // a calibrated kernel ("int8", "csr", ...), or sgemm's rate when it has none
  component,  // the component's own calibrated rates (GFLOP/s, GB/s, latency)
};

/// How the performance model prices one task (ComponentSpec::rate): its
/// Cost::flops at the rate of kernel `name` for the product y[m, n] = x[m, k] W,
/// or at the component's own calibrated rates. An epilogue (a fused
/// activation) adds epilogue_flops at the calibrated rate of the component
/// entry `epilogue`, when the calibration has one.
///
///   s.rate = [](const TaskShape& t) {
///     return TaskRate{RateKind::gemm, "sgemm", t.ports[2].rows, t.ports[2].cols, t.ports[0].cols};
///   };
struct TaskRate {
  RateKind kind = RateKind::component;
  std::string name;  // "sgemm", "dgemm", "int8", ...; for component: "" (the component's name)
  std::int64_t m = 0, n = 0, k = 0;
  std::string epilogue;  // "" for none
  double epilogue_flops = 0;
};

/// A weight `ymlopt optimize` stored compressed, bound to a task's port
/// (CompressedReader::bind). Its file holds a record "ymlopt.format.<key>"
/// (format, group, block, layout) and companion tensors "<key>.<role>", which
/// the engine declares beside the weight, split like it along the output
/// features.
struct CompressedWeight {
  std::size_t port = 0;        // the task's port bound to the weight
  std::string name, src;       // the data's name and its file
  std::string format;          // "int8", "int4", "csr", "bsr", "nm24", "dense", ...
  std::int64_t group = 0, block = 0;
  bool nk = false;             // declared [n, k] (torch Linear) rather than [k, n]
  std::string activations;     // "f32": weight-only codes; "" the default
  bool tiled = false;          // the port reads a tile of the weight, not all of it
  std::vector<std::string> roles;  // its companions in the file, in declaration order
  /// The value the workflow gives the task's parameter `name`; nullptr when it gives none.
  std::function<const ArgValue*(std::string_view)> given;
};

/// What a task reading a compressed weight binds: companion tensors to ports
/// (a port the component lacks is skipped), and the arguments the stored
/// format implies.
struct CompanionBinding {
  std::vector<std::pair<std::string, std::string>> ports;  // (role, port name)
  std::vector<std::pair<std::string, ArgValue>> args;      // (parameter name, value)
};

/// How a component reads weights stored compressed (ComponentSpec::compressed).
///
///   s.compressed.port = "w";
///   s.compressed.roles = {"w", "w_scale"};
///   s.compressed.bind = [](const CompressedWeight& w, CompanionBinding& out) -> std::string {
///     if (w.format != "int8") return "'" + w.name + "': int8 weights only";
///     out.ports = {{"w", "w"}, {"w_scale", "w_scale"}};
///     out.args = {{"format", ArgValue{0, "int8"}}};
///     return "";
///   };
struct CompressedReader {
  std::string port;  // the port that may be bound to a compressed weight; "" for none
  std::string when;  // for diagnostics, when not always: "when it is an int8/int4 table"
  /// The companion roles it reads; the first holds the data and must be in the file.
  std::vector<std::string> roles;
  /// Checks the weight against the task and fills `out`; returns an error
  /// message (reported after the task's name), or "" when fine.
  std::function<std::string(const CompressedWeight&, CompanionBinding&)> bind;
};

/// A component: name `family.op`, ports, params, kernels and hooks.
struct ComponentSpec {
  std::string name;
  std::string doc;
  std::vector<PortSpec> ports;
  std::vector<ParamSpec> params;
  KernelFn cpu = nullptr;   // required
  /// Optional CUDA kernel (ports then hold device pointers; KernelContext::cuda_stream).
  /// No backend runs it yet (no StarPU here has CUDA): `ymlopt components`
  /// lists it, and the CUDA tests call it directly to compare it with the CPU kernel.
  KernelFn cuda = nullptr;
  /// With `cuda`: "" when the CUDA kernel handles this task (dtypes, strides,
  /// args), else why not, and the task must run on a CPU. Empty: it handles
  /// every task `check` accepts.
  std::function<std::string(const TaskShape&)> cuda_check;
  /// Optional OpenCL kernel (ports then hold cl_mem buffers; KernelContext::opencl_queue):
  /// the StarPU backends run it on OpenCL workers (ymlopt run --opencl N).
  KernelFn opencl = nullptr;
  /// With `opencl`: "" when the OpenCL kernel handles this task, else why not
  /// (the task must run on a CPU). Empty: it handles every task `check` accepts.
  std::function<std::string(const TaskShape&)> opencl_check;
  /// Shape/arg validation; returns an error message, or "" when fine.
  std::function<std::string(const TaskShape&)> check;
  /// Cost of one task (flops, bytes); default: bytes of all ports.
  std::function<Cost(const TaskShape&)> cost;
  /// How the performance model prices a task; empty: at the component's calibrated rates.
  std::function<TaskRate(const TaskShape&)> rate;
  /// How it reads weights stored compressed by `ymlopt optimize` (nn.linear's 'w').
  CompressedReader compressed;
  /// Tasks that must run on the host in submission order (file I/O).
  bool host_only = false;
};

/// Where components are registered. Implemented by the engine.
class Registry {
 public:
  virtual ~Registry() = default;
  /// Adds a component; throws std::invalid_argument on a duplicate or bad spec.
  virtual void add(ComponentSpec spec) = 0;
  virtual const ComponentSpec* find(std::string_view name) const = 0;
};

}  // namespace ymlopt

/// A plugin shared library exports these two C symbols; use the macro:
///
///   YMLOPT_PLUGIN(reg) { register_mine(reg); }
#define YMLOPT_PLUGIN(reg_name)                                                   \
  extern "C" int ymlopt_plugin_abi_version() { return ::ymlopt::kSdkAbiVersion; } \
  extern "C" void ymlopt_plugin_register(::ymlopt::Registry& reg_name)
