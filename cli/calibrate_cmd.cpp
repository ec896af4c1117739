#include "calibrate_cmd.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <boost/program_options.hpp>
#include <chrono>
#include <cmath>
#include <cstring>
#include <ctime>
#include <time.h>
#include <filesystem>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <thread>
#include <ymlopt/half.hpp>

#include "run_workflow.hpp"
#include "quant/bf16_linear.hpp"
#include "quant/qlinear.hpp"
#include "ymlopt/scheduler/topology.hpp"
#include "register_builtin.hpp"
#include "report.hpp"
#include "sparse/sparse_linear.hpp"
#include "starpu_backend.hpp"
#include "gemm/gemm.hpp"
#include "usage_error.hpp"
#include "workflow_args.hpp"
#include "ymlopt/engine/compiler.hpp"
#include "ymlopt/scheduler/data_store.hpp"
#include "ymlopt/scheduler/scratch_dir.hpp"

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_corename(void);
}

namespace po = boost::program_options;
namespace fs = std::filesystem;

namespace ymlopt {
namespace {

// CPU time of the calling thread: the kernels run single-threaded, and CPU time
// leaves out the time slices other processes take on a shared machine
double now_s() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

/// Thread CPU seconds of one call of f: the fastest of `reps` batches of at least
/// `min_s` each (one warm-up call). The fastest, not the median: on a shared machine
/// the slower batches measure the other users (caches, memory bus), and the model
/// prices the machine.
template <class F>
double time_best(F&& f, int reps, double min_s) {
  double t0 = now_s();
  f();
  const double once = std::max(now_s() - t0, 1e-7);
  const int inner = std::max(1, int(std::ceil(min_s / once)));
  std::vector<double> v;
  for (int r = 0; r < reps; ++r) {
    t0 = now_s();
    for (int i = 0; i < inner; ++i) f();
    v.push_back((now_s() - t0) / inner);
  }
  return *std::min_element(v.begin(), v.end());
}

/// The q-quantile (0..1) of v.
double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[size_t(q * double(v.size() - 1) + 0.5)];
}

struct Sizes {
  int reps;
  double min_s;
  std::size_t pool_bytes;  // weight operands cycled through per kernel (WeightPool)
};

/// Copies of a kernel's weight (any value type owning its storage: a vector, a CSR
/// matrix with its plan) that the timed calls take in turn, so each call reads its
/// weight from memory as a model's forward pass does (every weight used once, the
/// whole set far larger than the caches): enough copies of `one_bytes` to fill
/// `bytes` (Sizes::pool_bytes, twice the largest cache), 2 to 256 of them. The
/// activations stay one buffer, warm, as in a model where one input feeds a layer's tiles.
///   WeightPool b(b32, b32.size() * 4, s.pool_bytes);  time_best([&] { sgemm(a, b.next().data(), c); }, ...);
template <class W>
class WeightPool {
 public:
  WeightPool(const W& w, std::size_t one_bytes, std::size_t bytes) {
    const std::size_t one = std::max<std::size_t>(one_bytes, 1);
    copies_.resize(std::clamp<std::size_t>((bytes + one - 1) / one, 2, 256), w);
  }
  const W& next() { return copies_[turn_++ % copies_.size()]; }

 private:
  std::vector<W> copies_;
  std::size_t turn_ = 0;
};

template <class T>
std::size_t bytes_of(const std::vector<T>& v) {
  return v.size() * sizeof(T);
}

/// Twice the largest cache of the machine (hwloc; the L3 of every package together),
/// at least 64 MiB: what the weight pools fill.
std::size_t weight_pool_bytes() {
  std::uint64_t largest = 0;  // probe_topology never throws; without hwloc the list is empty
  for (const PackageInfo& p : probe_topology().package_list)
    for (const CacheInfo& c : p.caches) largest = std::max<std::uint64_t>(largest, c.size * std::uint64_t(c.count));
  return std::size_t(std::max<std::uint64_t>(2 * largest, std::uint64_t(64) << 20));
}

std::vector<float> random_floats(size_t n, std::uint32_t seed) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

RatePoint gemm_point(bool f64, std::int64_t m, std::int64_t n, std::int64_t k, const Sizes& s) {
  const auto a32 = random_floats(size_t(m * k), 1), b32 = random_floats(size_t(k * n), 2);
  double t = 0;
  if (f64) {
    std::vector<double> a(a32.begin(), a32.end()), c(size_t(m * n));
    const std::vector<double> b64(b32.begin(), b32.end());
    WeightPool b(b64, bytes_of(b64), s.pool_bytes);
    t = time_best([&] { gemm::gemm(false, false, m, n, k, 1.0, a.data(), k, b.next().data(), n, 0.0, c.data(), n); },
                    s.reps, s.min_s);
  } else {
    std::vector<float> c(size_t(m * n));
    WeightPool b(b32, bytes_of(b32), s.pool_bytes);
    // the model kernels' library (nn.linear, attention: OpenBLAS); blas.gemm's oneDNN
    // runs 512-1024 tiles ~1.1x faster, which prices tiled-GEMM workflows slightly high
    t = time_best([&] { gemm::gemm(false, false, m, n, k, 1.0f, a32.data(), k, b.next().data(), n, 0.0f, c.data(), n,
                                   gemm::Library::openblas); },
                    s.reps, s.min_s);
  }
  return {m, n, k, 2.0 * double(m) * double(n) * double(k) / t / 1e9};
}

RatePoint quant_point(int bits, std::int64_t m, std::int64_t n, std::int64_t k, const Sizes& s) {
  std::mt19937 g(3);
  const std::int64_t group = bits == 4 ? 32 : 0;  // int4 as q4_0 (group 32); int8 per channel
  const std::int64_t row_bytes = bits == 8 ? k : k / 2, groups = group ? k / group : 1;
  std::vector<std::int8_t> q(size_t(n * row_bytes));
  for (auto& c : q) c = std::int8_t(int(g() % 255) - 127);
  std::vector<float> scale(size_t(n * groups), 0.01f), y(size_t(m * n));
  const auto x = random_floats(size_t(m * k), 4);
  quant::QWeight w;
  w.bits = bits;
  w.q_ld = row_bytes;
  w.n = n;
  w.k = k;
  w.group = group;
  w.scale = scale.data();
  w.scale_ld = groups;
  WeightPool codes(q, bytes_of(q), s.pool_bytes);
  const double t = time_best(
      [&] {
        w.q = codes.next().data();
        quant::linear(x.data(), m, k, w, y.data(), n);
      },
      s.reps, s.min_s);
  return {m, n, k, 2.0 * double(m) * double(n) * double(k) / t / 1e9};
}

// CSR at 90% sparsity and 2:4, flops as nn.linear's cost counts them (2·m·nnz; m·n·k for 2:4).
/// quant::linear_bf16 (format=bf16) on [n, k] bf16 weights.
RatePoint bf16_point(std::int64_t m, std::int64_t n, std::int64_t k, const Sizes& s) {
  const auto wf = random_floats(size_t(n * k), 7);
  std::vector<std::uint16_t> w(wf.size());
  for (std::size_t i = 0; i < wf.size(); ++i) w[i] = half::bf16_bits_from_float(wf[i]);
  const auto x = random_floats(size_t(m * k), 8);
  std::vector<float> y(size_t(m * n));
  WeightPool codes(w, bytes_of(w), s.pool_bytes);
  const double t = time_best([&] { quant::linear_bf16(x.data(), m, k, codes.next().data(), n, k, k, y.data(), n); },
                             s.reps, s.min_s);
  return {m, n, k, 2.0 * double(m) * double(n) * double(k) / t / 1e9};
}

// CSR with fewer than sparse::kCsrPlanMaxM tokens runs on a plan, as nn.linear runs it
// for a weight the engine names (the plan's build is once per weight, not timed).
RatePoint sparse_point(bool csr, std::int64_t m, std::int64_t n, std::int64_t k, const Sizes& s) {
  std::mt19937 g(5);
  auto w = random_floats(size_t(n * k), 6);
  for (std::int64_t i = 0; i < n * k; ++i) {
    if (csr) {
      if (g() % 10 != 0) w[size_t(i)] = 0;
    } else if (i % 4 >= 2) {
      w[size_t(i)] = 0;  // keep 2 of each group of 4 (positions 0, 1)
    }
  }
  const auto x = random_floats(size_t(m * k), 7);
  std::vector<float> y(size_t(m * n));
  if (csr) {
    struct Planned {
      sparse::Csr c;
      sparse::CsrPlan plan;
    };
    Planned one{sparse::to_csr(w.data(), n, k, k), {}};
    const bool planned = m < sparse::kCsrPlanMaxM;
    if (planned) one.plan = sparse::plan_gemv(one.c.view());
    const std::size_t nnz = one.c.values.size();
    WeightPool pool(one, nnz * 8 + (planned ? one.plan.bytes() : 0), s.pool_bytes);
    const double t = time_best(
        [&] {
          const Planned& c = pool.next();
          sparse::linear(x.data(), m, k, c.c.view(), y.data(), n, planned ? &c.plan : nullptr);
        },
        s.reps, s.min_s);
    return {m, n, k, 2.0 * double(m) * double(nnz) / t / 1e9};
  }
  const sparse::Nm24 c = sparse::to_nm24(w.data(), n, k, k);
  WeightPool pool(c, bytes_of(c.values) + bytes_of(c.index), s.pool_bytes);
  const double t = time_best([&] { sparse::linear(x.data(), m, k, pool.next().view(), y.data(), n); }, s.reps, s.min_s);
  return {m, n, k, double(m) * double(n) * double(k) / t / 1e9};
}

// Streaming read (a 16-lane sum) and memcpy over 256 MiB, timed per 32 MiB chunk
// (best chunk: a time slice lost to another process spoils one chunk, not the figure).
std::pair<double, double> bandwidth(const Sizes& s) {
  const size_t n = (256u << 20) / sizeof(float), chunk = (32u << 20) / sizeof(float);
  std::vector<float> a(n, 1.0f), b(chunk);
  volatile float sink = 0;
  double tr = 1e9, tc = 1e9;
  for (int pass = 0; pass < std::min(s.reps, 3); ++pass)
    for (size_t c0 = 0; c0 < n; c0 += chunk) {
      double t0 = now_s();
      float acc[16] = {};
      for (size_t i = c0; i < c0 + chunk; i += 16)
        for (int j = 0; j < 16; ++j) acc[j] += a[i + size_t(j)];
      float t = 0;
      for (float v : acc) t += v;
      sink = sink + t;
      tr = std::min(tr, now_s() - t0);
      t0 = now_s();
      std::memcpy(b.data(), a.data() + c0, chunk * sizeof(float));
      tc = std::min(tc, now_s() - t0);
    }
  return {double(chunk * sizeof(float)) / tr / 1e9, 2.0 * double(chunk * sizeof(float)) / tc / 1e9};
}

// First read of a 64 MiB file mapped copy-on-write (as DataStore maps src= files),
// the file in the page cache: page faults + copy from the cache, best of 3 fresh mappings
double mapped_bandwidth(const std::string& dir) {
  const std::string path = dir + "/mapped.bin";
  const size_t bytes = 64u << 20;
  {
    std::vector<char> data(bytes, 1);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) throw std::runtime_error("cannot write " + path);
    const size_t w = std::fwrite(data.data(), 1, bytes, f);
    std::fclose(f);
    if (w != bytes) throw std::runtime_error("cannot write " + path);
  }
  const int fd = open(path.c_str(), O_RDONLY);
  if (fd < 0) throw std::runtime_error("cannot open " + path);
  double best = 1e9;
  volatile float sink = 0;
  for (int rep = 0; rep < 3; ++rep) {
    void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) break;
    const float* a = static_cast<const float*>(p);
    const double t0 = now_s();
    float acc[16] = {};
    for (size_t i = 0; i < bytes / sizeof(float); i += 16)
      for (int j = 0; j < 16; ++j) acc[j] += a[i + size_t(j)];
    float t = 0;
    for (float v : acc) t += v;
    sink = sink + t;
    best = std::min(best, now_s() - t0);
    munmap(p, bytes);
  }
  close(fd);
  std::remove(path.c_str());
  return double(bytes) / best / 1e9;
}

// GPT-2-sized tasks (128 tokens, width 768, 3 heads per attention task) of the
// non-GEMM components, repeated; each task timed by the sequential backend
const char* kComponentWorkflow = R"(<workflow name="calibrate_components">
  <param name="reps" type="int" default="5"/>
  <param name="dir" type="string" default="/tmp"/>
  <data name="h" shape="128,768" init="random" seed="1"/>
  <data name="x" shape="128,768"/>
  <data name="gam" shape="768" init="ones"/>
  <data name="bet" shape="768" init="zeros"/>
  <data name="qkv" shape="128,2304" tile="128,192" init="random" seed="2"/>
  <data name="o" shape="128,768" tile="128,192"/>
  <data name="f" shape="128,3072" init="random" seed="3"/>
  <data name="f2" shape="128,3072"/>
  <data name="ids" dtype="i32" shape="128" init="zeros"/>
  <data name="table" shape="1024,768" init="random" seed="4"/>
  <data name="big" shape="1024,4096" init="zeros"/>
  <!-- one weight per nn.linear variant: each then meets its weight in the same cache state
       (one rep ago), so with-minus-without is the epilogue, not the weight's cache misses -->
  <data name="w" shape="768,256" init="random" seed="5"/>
  <data name="w_gelu" shape="768,256" init="random" seed="6"/>
  <data name="w_silu" shape="768,256" init="random" seed="7"/>
  <data name="y" shape="128,256"/>
  <seq var="r" from="0" to="${reps}">
    <task component="nn.layernorm"><in port="x" data="h"/><in port="gamma" data="gam"/><in port="beta" data="bet"/><out port="y" data="x"/></task>
    <task component="nn.rmsnorm"><in port="x" data="h"/><in port="weight" data="gam"/><out port="y" data="x"/></task>
    <task component="nn.attention"><in port="q" data="qkv[0,0]"/><in port="k" data="qkv[0,4]"/><in port="v" data="qkv[0,8]"/>
      <out port="y" data="o[0,0]"/><arg name="heads" value="3"/><arg name="seq" value="128"/><arg name="causal" value="true"/></task>
    <task component="nn.rope"><inout port="x" data="qkv[0,1]"/><arg name="heads" value="3"/><arg name="seq" value="128"/></task>
    <task component="tensor.add"><in port="a" data="h"/><in port="b" data="x"/><out port="c" data="x"/></task>
    <task component="nn.gelu"><in port="x" data="f"/><out port="y" data="f2"/></task>
    <task component="nn.silu"><in port="x" data="f"/><out port="y" data="f2"/></task>
    <task component="nn.softmax"><in port="x" data="f"/><out port="y" data="f2"/></task>
    <task component="nn.swiglu"><in port="gate" data="f2"/><in port="up" data="f"/><out port="y" data="f2"/></task>
    <task component="nn.embedding"><in port="ids" data="ids"/><in port="table" data="table"/><out port="y" data="x"/></task>
    <task component="tensor.copy"><in port="x" data="f"/><out port="y" data="f2"/></task>
    <task component="nn.linear" name="linear"><in port="x" data="h"/><in port="w" data="w"/><out port="y" data="y"/></task>
    <task component="nn.linear" name="linear_gelu"><in port="x" data="h"/><in port="w" data="w_gelu"/><out port="y" data="y"/>
      <arg name="activation" value="gelu_tanh"/></task>
    <task component="nn.linear" name="linear_silu"><in port="x" data="h"/><in port="w" data="w_silu"/><out port="y" data="y"/>
      <arg name="activation" value="silu"/></task>
    <task component="io.save" name="save_big"><in port="x" data="big"/><arg name="path" value="${dir}/calibrate.npy"/></task>
    <task component="io.save" name="save_small"><in port="x" data="gam"/><arg name="path" value="${dir}/calibrate-small.npy"/></task>
  </seq>
</workflow>
)";

// a chain of tiny tasks: each waits for the previous one (per-task overhead)
std::string chain_workflow(int n) {
  return "<workflow name=\"calibrate_overhead\">\n  <data name=\"x\" shape=\"1\" init=\"ones\"/>\n"
         "  <seq var=\"i\" from=\"0\" to=\"" +
         std::to_string(n) +
         "\"><task component=\"tensor.scale\"><inout port=\"x\" data=\"x\"/></task></seq>\n</workflow>\n";
}

Dag compile_text(const std::string& text, const ComponentRegistry& reg,
                 std::vector<std::pair<std::string, std::string>> sets = {}) {
  Diagnostics d;
  CompileOptions o;
  o.sets = std::move(sets);
  CompileResult r = compile_workflow_text("<calibrate>", text, o, reg, d);
  if (!r.ok) throw std::runtime_error("calibration workflow does not compile:\n" + d.str());
  return std::move(r.dag);
}

ExecResult execute(const Dag& dag, const std::string& backend, const std::string& run_dir) {
  DataStore store(dag);
  RunOptions o;
  o.backend = backend;
  o.exec.run_dir = run_dir;
  ExecResult r = run_workflow(dag, store, o).result;
  if (!r.ok) throw std::runtime_error("calibration run (" + backend + ") failed: " + r.error);
  return r;
}

std::string hostname() {
  char h[256] = {};
  if (gethostname(h, sizeof h - 1) != 0) return "unknown";
  return h;
}

}  // namespace

Calibration measure_calibration(bool quick) {
  openblas_set_num_threads(1);  // as inside engine tasks
  // short batches: more of them run undisturbed
  const Sizes s{quick ? 5 : 11, quick ? 0.002 : 0.003, weight_pool_bytes()};
  Calibration c;
  c.calibrated = true;
  c.host = hostname();
  c.cpu_model = cpu_model_name();
  c.blas_core = std::string(openblas_get_corename()) + "; blas.gemm f32: " + gemm::sgemm_library();
  c.hardware_threads = int(std::max(1u, std::thread::hardware_concurrency()));
  {
    const std::time_t t = std::time(nullptr);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
    c.created = buf;
  }
  // GEMM: squares and the linear tiles of the shipped models (128 tokens; 256-column
  // tiles of width 768 / ffn 3072 weights, 192-column QKV tiles, 4096-row vocab tiles)
  std::vector<std::array<std::int64_t, 3>> sq = {{32, 32, 32}, {64, 64, 64}, {128, 128, 128}, {256, 256, 256}, {512, 512, 512}};
  if (!quick) sq.push_back({1024, 1024, 1024});
  const std::vector<std::array<std::int64_t, 3>> tiles = {
      {128, 192, 768}, {128, 256, 768}, {128, 256, 3072}, {128, 4096, 768}, {128, 768, 768}, {16, 256, 768}};
  for (const auto& v : sq) c.kernels["sgemm"].push_back(gemm_point(false, v[0], v[1], v[2], s));
  for (const auto& v : tiles) c.kernels["sgemm"].push_back(gemm_point(false, v[0], v[1], v[2], s));
  for (const auto& v : sq) c.kernels["dgemm"].push_back(gemm_point(true, v[0], v[1], v[2], s));
  c.kernels["dgemm"].push_back(gemm_point(true, 128, 256, 768, s));
  const std::vector<std::array<std::int64_t, 3>> ctiles = {{128, 256, 768}, {128, 256, 3072}, {128, 768, 768}};
  for (const auto& v : ctiles) {
    c.kernels["int8"].push_back(quant_point(8, v[0], v[1], v[2], s));
    c.kernels["int4"].push_back(quant_point(4, v[0], v[1], v[2], s));
    c.kernels["bf16"].push_back(bf16_point(v[0], v[1], v[2], s));
    c.kernels["csr"].push_back(sparse_point(true, v[0], v[1], v[2], s));
    c.kernels["nm24"].push_back(sparse_point(false, v[0], v[1], v[2], s));
  }
  // one token (decoding): CSR on its plan
  for (const auto& v : std::vector<std::array<std::int64_t, 3>>{{1, 768, 768}, {1, 3072, 768}, {4, 768, 768}})
    c.kernels["csr"].push_back(sparse_point(true, v[0], v[1], v[2], s));
  std::tie(c.read_gbs, c.copy_gbs) = bandwidth(s);

  ComponentRegistry reg;
  register_builtin_components(reg);
  const ScratchDir scratch("calibrate");
  const std::string& run_dir = scratch.path();
  c.mapped_gbs = mapped_bandwidth(run_dir);
  {
    const Dag dag = compile_text(kComponentWorkflow, reg, {{"reps", quick ? "5" : "15"}, {"dir", run_dir}});
    const ExecResult r = execute(dag, "sequential", run_dir);
    std::map<std::string, std::vector<double>> fl, by, save_s;
    double big_bytes = 0;
    for (const TaskNode& t : dag.tasks) {
      const auto& rec = r.records[size_t(t.id)];
      const double sec = std::max((rec.end_us - rec.start_us) * 1e-6, 1e-9);
      if (t.comp->name == "nn.linear") {  // the activation epilogue: with it minus without
        save_s[t.label].push_back(sec);
        continue;
      }
      if (t.comp->name == "io.save") {  // latency + bytes / bandwidth, from a small and a big file
        save_s[t.label].push_back(sec);
        if (t.label == "save_big") big_bytes = t.cost.bytes;
        continue;
      }
      fl[t.comp->name].push_back(t.cost.flops / sec / 1e9);
      by[t.comp->name].push_back(t.cost.bytes / sec / 1e9);
    }
    // the faster quartile: robust to the time slices other processes take
    for (const auto& [name, v] : fl) c.components[name] = {quantile(v, 0.75), quantile(by[name], 0.75)};
    // saves by their median: they time the storage device, not the CPU, and a disk with a
    // write-back burst buffer takes the first tens of MiB several times faster than it
    // sustains (here 10-12 ms per 16 MiB, then 47 ms): a model's outputs meet the sustained rate
    const double small = quantile(save_s["save_small"], 0.5), big = quantile(save_s["save_big"], 0.5);
    c.components["io.save"] = {0, big > small ? big_bytes / (big - small) / 1e9 : big_bytes / big / 1e9, small * 1e6};
    // nn.linear's activations as perf_model prices them: act_flops (gelu 8, silu 4) per output element
    const double plain = quantile(save_s["linear"], 0.25), mn = 128.0 * 256;
    for (const auto& [act, fl] : {std::pair<const char*, double>{"gelu", 8}, {"silu", 4}}) {
      const double extra = quantile(save_s[std::string("linear_") + act], 0.25) - plain;
      // a difference of two noisy times: floored at 0.1 ns per element (AVX-512 runs the
      // gelu_tanh epilogue at 0.2-0.5 ns; the floor only keeps the rate finite)
      c.components[std::string("nn.linear.") + act] = {fl * mn / std::max(extra, mn * 1e-10) / 1e9, 0, 0};
    }
  }
  {
    const int n = quick ? 300 : 1000;
    const Dag dag = compile_text(chain_workflow(n), reg);
    for (const std::string b : {"sequential", "starpu"}) {
      std::vector<double> v;
      for (int rep = 0; rep < (quick ? 1 : 3); ++rep) v.push_back(execute(dag, b, run_dir).makespan_us / n);
      c.task_overhead_us[b] = *std::min_element(v.begin(), v.end());
    }
  }
  c.starpu_workers = int(starpu_worker_names().size());
  return c;
}

std::string format_calibration(const Calibration& c) {
  std::ostringstream o;
  char buf[160];
  o << "machine: " << c.host << ", " << c.cpu_model << " (" << c.hardware_threads << " threads), OpenBLAS core "
    << c.blas_core << (c.calibrated ? "" : "  [built-in estimates: run ymlopt calibrate]") << "\n";
  o << "kernel rates, 1 thread (GFLOP/s as the cost functions count flops):\n";
  for (const auto& [name, pts] : c.kernels)
    for (const auto& p : pts) {
      std::snprintf(buf, sizeof buf, "  %-6s m=%-5lld n=%-5lld k=%-5lld %8.1f\n", name.c_str(), (long long)p.m,
                    (long long)p.n, (long long)p.k, p.gflops);
      o << buf;
    }
  o << "components (GPT-2-sized tasks):\n";
  for (const auto& [name, r] : c.components) {
    std::snprintf(buf, sizeof buf, "  %-16s %8.2f GFLOP/s %8.2f GB/s", name.c_str(), r.gflops, r.gbs);
    o << buf;
    if (r.latency_us > 0) std::snprintf(buf, sizeof buf, "  + %.0f us per task\n", r.latency_us);
    else std::snprintf(buf, sizeof buf, "\n");
    o << buf;
  }
  std::snprintf(buf, sizeof buf, "memory: read %.1f GB/s, copy %.1f GB/s, first read of a mapped file %.1f GB/s (1 thread)\n",
                c.read_gbs, c.copy_gbs, c.mapped_gbs);
  o << buf;
  o << "per-task overhead:";
  for (const auto& [b, us] : c.task_overhead_us) {
    std::snprintf(buf, sizeof buf, " %s %.1f us", b.c_str(), us);
    o << buf;
  }
  o << "\nStarPU CPU workers: " << c.starpu_workers << "\n";
  return o.str();
}

Calibration calibration_or_builtin() {
  if (auto c = load_calibration()) return *c;
  return builtin_calibration();
}

int cmd_calibrate(const std::vector<std::string>& args) {
  bool quick = false, json = false;
  std::string out;
  po::options_description d("ymlopt calibrate [options]");
  d.add_options()("help,h", "show this help")("quick", po::bool_switch(&quick), "fewer shapes and repetitions (~10 s)")(
      "out,o", po::value(&out), "write the JSON here (default: the per-machine cache file)")(
      "json", po::bool_switch(&json), "print the JSON instead of the table");
  if (parse_or_help(args, d, nullptr)) return 0;
  if (out.empty()) out = calibration_path();
  if (out.empty()) throw UsageError("no cache directory (HOME and XDG_CACHE_HOME unset): give --out FILE");
  const Calibration c = measure_calibration(quick);
  const fs::path parent = fs::path(out).parent_path();
  if (!parent.empty()) fs::create_directories(parent);
  write_file_atomic(out, to_json(c).dump(1) + "\n");
  if (json) std::cout << to_json(c).dump(1) << "\n";
  else std::cout << format_calibration(c) << "written: " << out << "\n";
  return 0;
}

}  // namespace ymlopt

namespace ymlopt {

Prediction predict_run(const Dag& dag, const std::string& backend, int ncpu, const History* history) {
  const Calibration c = calibration_or_builtin();
  const int workers = backend == "sequential" ? 1 : (ncpu > 0 ? ncpu : std::max(1, c.starpu_workers));
  return predict(dag, c, workers, backend, history);
}

std::vector<double> task_seconds(const ExecResult& r) {
  std::vector<double> s(r.records.size(), -1.0);
  for (std::size_t i = 0; i < r.records.size(); ++i)
    if (r.records[i].ran && !r.records[i].restored) s[i] = (r.records[i].end_us - r.records[i].start_us) * 1e-6;
  return s;
}

nlohmann::json prediction_report(const Prediction& p, double measured_us, double store_bytes, double peak_rss_bytes) {
  nlohmann::json j = to_json(p);
  const double pred_us = p.makespan_s * 1e6, pred_store = double(p.parameter_bytes + p.activation_bytes);
  j["status"] = p.calibrated ? "calibrated" : "uncalibrated (run ymlopt calibrate)";
  j["calibration_file"] = calibration_path();
  // the CPU time this process got: on a shared machine, wall time / CPU share is what
  // the run would have taken alone (the model prices the machine, not its other users)
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double cpu_s = double(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) + 1e-6 * double(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
  // (only for a process that ran just this DAG once: peak_rss_bytes > 0)
  const double share =
      measured_us > 0 && peak_rss_bytes > 0 ? std::min(1.0, cpu_s / (measured_us * 1e-6 * p.workers)) : 0.0;
  j["measured"] = {{"makespan_us", measured_us}, {"store_bytes", store_bytes}, {"peak_rss_bytes", peak_rss_bytes},
                   {"process_cpu_s", cpu_s}, {"cpu_share", share}};
  j["ratio"] = {{"time", measured_us > 0 ? pred_us / measured_us : 0.0},
                {"time_cpu_adjusted", share > 0 ? pred_us / (measured_us * share) : 0.0},
                {"store_memory", store_bytes > 0 ? pred_store / store_bytes : 0.0},
                {"peak_rss", peak_rss_bytes > 0 ? double(p.total_bytes()) / peak_rss_bytes : 0.0}};
  return j;
}

std::string prediction_line(const nlohmann::json& r) {
  char buf[320];
  if (r.value("one_iteration", false)) {  // runtime loops: no prediction of the whole run to compare
    std::snprintf(buf, sizeof buf,
                  "predicted %.1f ms for one iteration of each runtime loop (the run took %.1f ms); memory predicted "
                  "%.1f MiB, allocated+mapped %.1f MiB (%.3fx)\n",
                  r["makespan_us"].get<double>() / 1e3, r["measured"]["makespan_us"].get<double>() / 1e3,
                  double(r["parameter_bytes"].get<std::int64_t>() + r["activation_bytes"].get<std::int64_t>()) / (1 << 20),
                  r["measured"]["store_bytes"].get<double>() / (1 << 20), r["ratio"]["store_memory"].get<double>());
    return buf;
  }
  std::snprintf(buf, sizeof buf,
                "predicted %.1f ms, measured %.1f ms (%.2fx; %.2fx at the CPU share %.2f the run got); memory "
                "predicted %.1f MiB, allocated+mapped %.1f MiB (%.3fx)%s\n",
                r["makespan_us"].get<double>() / 1e3, r["measured"]["makespan_us"].get<double>() / 1e3,
                r["ratio"]["time"].get<double>(), r["ratio"]["time_cpu_adjusted"].get<double>(),
                r["measured"]["cpu_share"].get<double>(),
                double(r["parameter_bytes"].get<std::int64_t>() + r["activation_bytes"].get<std::int64_t>()) / (1 << 20),
                r["measured"]["store_bytes"].get<double>() / (1 << 20), r["ratio"]["store_memory"].get<double>(),
                r["calibrated"].get<bool>() ? "" : " [uncalibrated (run ymlopt calibrate)]");
  return buf;
}

}  // namespace ymlopt
