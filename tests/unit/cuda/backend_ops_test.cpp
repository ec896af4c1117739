// A test-backend-ops style harness (after ggml's tests/test-backend-ops.cpp):
// for every registered component with a CUDA kernel (ComponentSpec::cuda), a
// few cases (shapes, odd sizes, strided tiles, args) are run twice on the same
// random inputs: the CPU kernel on host buffers, and the CUDA kernel on device
// copies (views with device pointers, ctx.cuda_stream() a fresh stream). Every
// written port is compared with a tolerance per op, padding included (a kernel
// must not write outside its view). Without a device each case skips with the
// reason; the coverage and host-side checks run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../components/test_context.hpp"
#include "register_builtin.hpp"

#if YMLOPT_HAVE_CUDA
#include <cuda_runtime.h>

#include "nn/nn_cuda.hpp"
#endif

namespace {

using ymlopt::Access;
using ymlopt::ComponentSpec;
using ymlopt::DType;
using ymlopt::TensorView;
using ymlopt::test::TestRegistry;

/// The components this build attaches a CUDA kernel to.
const std::set<std::string> kCudaComponents = {"nn.softmax", "nn.gelu",    "nn.silu",  "nn.layernorm", "nn.rmsnorm",
                                               "nn.attention", "nn.embedding", "nn.rope", "blas.gemm",   "quant.dequant", "nn.linear"};

/// One port's host data: a row-major [rows, cols] buffer with leading dimension
/// ld, padding filled with a sentinel. An unbound optional port has rows = cols = 0.
struct HostPort {
  DType dtype = DType::f32;
  std::int64_t rows = 0, cols = 0, ld = 0;
  ymlopt::Shape shape;
  std::vector<unsigned char> bytes;

  bool bound() const { return rows > 0 || cols > 0; }
  std::size_t nbytes() const { return bytes.size(); }
  TensorView view(void* data) const {
    TensorView v;
    if (!bound()) return v;
    v.data = data;
    v.dtype = dtype;
    v.rows = rows;
    v.cols = cols;
    v.ld = ld;
    v.shape = shape;
    return v;
  }
};

HostPort make_port(DType dt, std::int64_t rows, std::int64_t cols, std::int64_t pad = 0) {
  HostPort p;
  p.dtype = dt;
  p.rows = rows;
  p.cols = cols;
  p.ld = cols + pad;
  p.shape = {rows, cols};
  p.bytes.assign(static_cast<std::size_t>(std::max<std::int64_t>(rows * p.ld, 1)) * ymlopt::dtype_size(dt), 0);
  if (dt == DType::f32) {  // sentinel 77 in the padding and in outputs before the run
    auto* f = reinterpret_cast<float*>(p.bytes.data());
    std::fill(f, f + p.bytes.size() / 4, 77.f);
  }
  return p;
}

HostPort f32(std::int64_t rows, std::int64_t cols, std::uint32_t seed, std::int64_t pad = 0, float scale = 1.f) {
  HostPort p = make_port(DType::f32, rows, cols, pad);
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  auto* f = reinterpret_cast<float*>(p.bytes.data());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) f[r * p.ld + c] = u(g);
  return p;
}

HostPort vec_f32(std::int64_t n, std::uint32_t seed) {
  HostPort p = f32(1, n, seed);
  p.shape = {n};
  return p;
}

HostPort out_f32(std::int64_t rows, std::int64_t cols, std::int64_t pad = 0) { return make_port(DType::f32, rows, cols, pad); }

/// Token ids in [0, vocab) as [n] (column = false) or [n, 1].
HostPort ids(std::int64_t n, std::int64_t vocab, std::uint32_t seed, bool column) {
  HostPort p = column ? make_port(DType::i32, n, 1) : make_port(DType::i32, 1, n);
  if (!column) p.shape = {n};
  std::mt19937 g(seed);
  std::uniform_int_distribution<std::int32_t> u(0, std::int32_t(vocab - 1));
  auto* v = reinterpret_cast<std::int32_t*>(p.bytes.data());
  for (std::int64_t i = 0; i < n; ++i) v[i] = u(g);
  return p;
}

/// Random int8 codes (all 256 byte values: int4 codes use both nibbles).
HostPort codes(std::int64_t rows, std::int64_t cols, std::uint32_t seed) {
  HostPort p = make_port(DType::i8, rows, cols);
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> u(-128, 127);
  for (auto& b : p.bytes) b = static_cast<unsigned char>(static_cast<std::int8_t>(u(g)));
  return p;
}

/// Positive scales (a quantizer's) and zero points in [0, 15].
HostPort positive_f32(std::int64_t rows, std::int64_t cols, std::uint32_t seed, float lo, float hi) {
  HostPort p = make_port(DType::f32, rows, cols);
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  auto* f = reinterpret_cast<float*>(p.bytes.data());
  for (std::int64_t i = 0; i < rows * cols; ++i) f[i] = u(g);
  return p;
}

struct Case {
  std::string component;
  std::string label;
  std::vector<HostPort> ports;
  std::map<std::string, std::string> args;
  double tol;  // |gpu - cpu| <= tol * max(1, |cpu|) per element of each written port; 0: bit-exact
};

/// The cases: a few shapes per component, odd sizes and strided tiles included.
std::vector<Case> cases() {
  std::vector<Case> c;
  // element-wise / row-wise, f32: ~1e-6 relative (GPU erff/tanhf/expf vs libm: a few ulp)
  for (auto [r, n] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {7, 33}, {64, 1000}}) {
    const std::string l = std::to_string(r) + "x" + std::to_string(n);
    c.push_back({"nn.softmax", l, {f32(r, n, 1, 0, 8.f), out_f32(r, n)}, {}, 1e-6});
    c.push_back({"nn.silu", l, {f32(r, n, 2, 0, 8.f), out_f32(r, n)}, {}, 1e-6});
    c.push_back({"nn.gelu", l + " tanh", {f32(r, n, 3, 0, 5.f), out_f32(r, n)}, {{"approximate", "tanh"}}, 1e-6});
    c.push_back({"nn.gelu", l + " erf", {f32(r, n, 4, 0, 5.f), out_f32(r, n)}, {{"approximate", "none"}}, 1e-6});
  }
  // norms: reductions in f32 on the GPU, double on the CPU: ~1e-5
  c.push_back({"nn.layernorm", "5x33", {f32(5, 33, 5), vec_f32(33, 6), vec_f32(33, 7), out_f32(5, 33)}, {}, 1e-5});
  c.push_back({"nn.layernorm", "4x768 no beta", {f32(4, 768, 8), vec_f32(768, 9), HostPort{}, out_f32(4, 768)},
               {{"eps", "1e-6"}}, 1e-5});
  c.push_back({"nn.rmsnorm", "7x129", {f32(7, 129, 10), vec_f32(129, 11), out_f32(7, 129)}, {}, 1e-5});
  c.push_back({"nn.rmsnorm", "2x4096 no weight", {f32(2, 4096, 12), HostPort{}, out_f32(2, 4096)}, {}, 1e-5});
  // GEMM: ~1e-4 (FP32 cuBLAS, no TF32)
  c.push_back({"blas.gemm", "13x7x29", {f32(13, 29, 13), f32(29, 7, 14), f32(13, 7, 15)}, {}, 1e-4});
  c.push_back({"blas.gemm", "64x96x80 strided beta=1 alpha=-0.5",
               {f32(64, 80, 16, 3), f32(80, 96, 17, 5), f32(64, 96, 18, 1)}, {{"beta", "1"}, {"alpha", "-0.5"}}, 1e-4});
  c.push_back({"blas.gemm", "transa transb 31x17x45",
               {f32(45, 31, 19), f32(17, 45, 20, 2), f32(31, 17, 21)}, {{"transa", "true"}, {"transb", "true"}}, 1e-4});
  // attention: ~1e-4 (online softmax in f32 vs blocked softmax with double sums)
  {
    const std::int64_t S = 37, B = 2, H = 2, D = 16;
    c.push_back({"nn.attention", "causal b2 s37 h2 d16",
                 {f32(B * S, H * D, 22), f32(B * S, H * D, 23), f32(B * S, H * D, 24), out_f32(B * S, H * D)},
                 {{"heads", "2"}, {"seq", "37"}, {"causal", "true"}}, 1e-4});
  }
  {
    const std::int64_t S = 70, H = 4, KV = 2, D = 64;  // GQA, head range, column slices of wider tensors
    c.push_back({"nn.attention", "gqa s70 h4 kv2 d64 heads [1,3) strided",
                 {f32(S, H * D, 25, 7), f32(S, KV * D, 26, 3), f32(S, KV * D, 27, 1), out_f32(S, H * D, 5)},
                 {{"heads", "4"}, {"kv_heads", "2"}, {"head_begin", "1"}, {"head_end", "3"}, {"scale", "0.2"}}, 1e-4});
  }
  c.push_back({"nn.attention", "causal s129 h1 d128",
               {f32(129, 128, 28), f32(129, 128, 29), f32(129, 128, 30), out_f32(129, 128)},
               {{"heads", "1"}, {"causal", "true"}}, 1e-4});
  c.push_back({"nn.attention", "s5 h3 d3 b3",
               {f32(15, 9, 31, 0, 3.f), f32(15, 9, 32, 0, 3.f), f32(15, 9, 33), out_f32(15, 9)},
               {{"heads", "3"}, {"seq", "5"}}, 1e-4});
  // embedding: a gather, bit-exact
  c.push_back({"nn.embedding", "[9] ids vocab 50 d 33", {ids(9, 50, 34, false), f32(50, 33, 35), out_f32(9, 33), HostPort{}, HostPort{}, HostPort{}, HostPort{}},
               {}, 0});
  c.push_back({"nn.embedding", "[300,1] ids vocab 7 d 1000 strided y",
               {ids(300, 7, 36, true), f32(7, 1000, 37, 4), out_f32(300, 1000, 3), HostPort{}, HostPort{}, HostPort{}, HostPort{}}, {}, 0});
  // rope: cos/sin in double on both sides, then two f32 products and a sum (an FMA on the GPU)
  c.push_back({"nn.rope", "half h4 d16 seq 6 offset 3", {f32(12, 64, 38, 0, 2.f), HostPort{}},
               {{"heads", "4"}, {"seq", "6"}, {"offset", "3"}}, 1e-6});
  c.push_back({"nn.rope", "interleaved h2 d10 rotary 6 base 500 strided", {f32(9, 20, 39, 3, 2.f), HostPort{}},
               {{"heads", "2"}, {"style", "interleaved"}, {"rotary_dim", "6"}, {"base", "500"}}, 1e-6});
  c.push_back({"nn.rope", "half h1 d128 long positions", {f32(3, 128, 40, 0, 2.f), HostPort{}},
               {{"heads", "1"}, {"offset", "4000"}}, 1e-6});
  // dequant: (code - zero) * scale, the same two f32 roundings: bit-exact
  c.push_back({"quant.dequant", "int8 per channel 5x37", {codes(5, 37, 41), positive_f32(1, 5, 42, 0.01f, 0.1f), HostPort{}, out_f32(5, 37)},
               {{"bits", "8"}, {"group", "0"}}, 0});
  c.push_back({"quant.dequant", "int4 group 32 asymmetric 6x64",
               {codes(6, 32, 43), positive_f32(6, 2, 44, 0.01f, 0.1f), positive_f32(6, 2, 45, 0.f, 15.f), out_f32(6, 64, 2)},
               {{"bits", "4"}, {"group", "32"}}, 0});
  c.push_back({"quant.dequant", "int4 symmetric group 64 3x128",
               {codes(3, 64, 46), positive_f32(3, 2, 47, 0.01f, 0.1f), HostPort{}, out_f32(3, 128)},
               {{"bits", "4"}, {"group", "64"}}, 0});
  // nn.linear: dense f32 (cuBLAS, ~1e-4) and symmetric per-channel int8 (exact int32 sums, then the same
  // two f32 products as quant::linear: ~1e-6)
  c.push_back({"nn.linear", "dense 13x29 -> 7",
               {f32(13, 29, 48), f32(29, 7, 49), HostPort{}, out_f32(13, 7), HostPort{}, HostPort{}, HostPort{},
                HostPort{}, HostPort{}},
               {}, 1e-4});
  c.push_back({"nn.linear", "dense transpose_w 40x64 -> 33, strided",
               {f32(40, 64, 50, 2), f32(33, 64, 51, 1), HostPort{}, out_f32(40, 33, 4), HostPort{}, HostPort{},
                HostPort{}, HostPort{}, HostPort{}},
               {{"transpose_w", "true"}}, 1e-4});
  {
    HostPort scale = positive_f32(1, 20, 52, 0.005f, 0.02f);
    scale.shape = {20};
    c.push_back({"nn.linear", "int8 per channel 9x68 -> 20",
                 {f32(9, 68, 53, 0, 3.f), codes(20, 68, 54), HostPort{}, out_f32(9, 20), HostPort{}, scale, HostPort{},
                  HostPort{}, HostPort{}},
                 {{"format", "int8"}}, 1e-6});
  }
  for (Case& k : c) {  // [n] scale vectors as the quantizers write them
    if (k.component == "quant.dequant" && k.args["group"] == "0") k.ports[1].shape = {k.ports[1].cols};
  }
  return c;
}

std::vector<TensorView> host_views(std::vector<HostPort>& ports) {
  std::vector<TensorView> v;
  for (HostPort& p : ports) v.push_back(p.view(p.bytes.data()));
  return v;
}

TestRegistry& registry() {
  static TestRegistry reg = [] {
    TestRegistry r;
    ymlopt::register_builtin_components(r);
    return r;
  }();
  return reg;
}

TEST(CudaBackendOps, AttachedComponentsMatchThisBuild) {
  std::set<std::string> with_cuda;
  for (const auto& [name, spec] : registry().specs)
    if (spec.cuda) with_cuda.insert(name);
#if YMLOPT_HAVE_CUDA
  EXPECT_EQ(with_cuda, kCudaComponents);
  EXPECT_GE(with_cuda.size(), 11u);
  for (const std::string& n : with_cuda) EXPECT_TRUE(registry().get(n).cuda_check) << n << " has no cuda_check";
#else
  EXPECT_TRUE(with_cuda.empty()) << "a CUDA kernel is attached in a build without nvcc";
#endif
}

TEST(CudaBackendOps, EveryCudaComponentHasCasesTheCudaKernelAccepts) {
  std::map<std::string, int> n_cases;
  for (Case& k : cases()) {
    const ComponentSpec& spec = registry().get(k.component);
    const auto views = host_views(k.ports);
    const ymlopt::Args args = ymlopt::test::make_args(spec, k.args);
    // the case is a valid task, and one the CUDA kernel takes (not sent back to a CPU)
    EXPECT_EQ(spec.check(ymlopt::TaskShape{views, args}), "") << k.component << " " << k.label;
    if (spec.cuda_check) {
      EXPECT_EQ(spec.cuda_check(ymlopt::TaskShape{views, args}), "") << k.component << " " << k.label;
    }
    ++n_cases[k.component];
  }
  for (const std::string& n : kCudaComponents) EXPECT_GE(n_cases[n], 1) << n << " has no harness case";
}

TEST(CudaBackendOps, CpuSideOfEveryCaseRuns) {
  // the harness's reference half, runnable everywhere: each case's CPU kernel
  // runs and writes its outputs (no sentinel 77 left in the first element)
  for (Case& k : cases()) {
    const ComponentSpec& spec = registry().get(k.component);
    ymlopt::test::TestContext ctx(spec, host_views(k.ports), k.args);
    ASSERT_NO_THROW(ctx.run()) << k.component << " " << k.label;
    for (std::size_t i = 0; i < k.ports.size(); ++i) {
      if (!k.ports[i].bound() || spec.ports[i].access == Access::read) continue;
      const float first = reinterpret_cast<const float*>(k.ports[i].bytes.data())[0];
      if (k.component == "nn.attention" && k.args.count("head_begin")) continue;  // head 0 is not computed
      EXPECT_NE(first, 77.f) << k.component << " " << k.label;
      EXPECT_TRUE(std::isfinite(first)) << k.component << " " << k.label;
    }
  }
}

#if YMLOPT_HAVE_CUDA

/// A KernelContext whose ports may be device views, with its own stream.
class CudaContext : public ymlopt::KernelContext {
 public:
  CudaContext(const ComponentSpec& spec, std::vector<TensorView> ports, const std::map<std::string, std::string>& args,
              void* stream)
      : ports_(std::move(ports)), args_(ymlopt::test::make_args(spec, args)), stream_(stream) {}
  std::span<const TensorView> ports() const override { return ports_; }
  const ymlopt::Args& args() const override { return args_; }
  void report(std::string, double) override {}
  const std::string& run_dir() const override { return dir_; }
  void* cuda_stream() const override { return stream_; }

 private:
  std::vector<TensorView> ports_;
  ymlopt::Args args_;
  void* stream_;
  std::string dir_ = ".";
};

#define CUDA_OK(call) ASSERT_EQ((call), cudaSuccess) << #call

/// Runs one case on both sides and compares every written port.
void run_case(Case k) {
  const ComponentSpec& spec = registry().get(k.component);
  ASSERT_NE(spec.cuda, nullptr) << k.component;
  std::vector<HostPort> cpu = k.ports, gpu_in = k.ports;
  {
    auto views = host_views(cpu);
    ymlopt::test::TestContext ctx(spec, views, k.args);
    ASSERT_NO_THROW(ctx.run()) << k.component << " " << k.label << " (CPU)";
  }
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreate(&stream));
  std::vector<void*> dev(gpu_in.size(), nullptr);
  std::vector<TensorView> dviews;
  for (std::size_t i = 0; i < gpu_in.size(); ++i) {
    if (gpu_in[i].bound()) {
      CUDA_OK(cudaMalloc(&dev[i], gpu_in[i].nbytes()));
      CUDA_OK(cudaMemcpy(dev[i], gpu_in[i].bytes.data(), gpu_in[i].nbytes(), cudaMemcpyHostToDevice));
    }
    dviews.push_back(gpu_in[i].view(dev[i]));
  }
  {
    CudaContext ctx(spec, dviews, k.args, stream);
    EXPECT_NO_THROW(spec.cuda(ctx)) << k.component << " " << k.label << " (CUDA)";
  }
  CUDA_OK(cudaStreamSynchronize(stream));
  for (std::size_t i = 0; i < gpu_in.size(); ++i) {
    if (!gpu_in[i].bound() || spec.ports[i].access == Access::read) continue;
    std::vector<unsigned char> got(gpu_in[i].nbytes());
    CUDA_OK(cudaMemcpy(got.data(), dev[i], got.size(), cudaMemcpyDeviceToHost));
    const std::vector<unsigned char>& want = cpu[i].bytes;
    const std::string what = k.component + " " + k.label + " port '" + spec.ports[i].name + "'";
    ASSERT_EQ(cpu[i].dtype, DType::f32) << what;
    const auto* g = reinterpret_cast<const float*>(got.data());
    const auto* w = reinterpret_cast<const float*>(want.data());
    const std::size_t n = want.size() / 4;
    std::size_t bad = 0;
    for (std::size_t e = 0; e < n && bad < 5; ++e) {
      const bool ok = k.tol == 0 ? std::memcmp(&g[e], &w[e], 4) == 0
                                 : std::fabs(double(g[e]) - double(w[e])) <= k.tol * std::max(1.0, std::fabs(double(w[e])));
      if (!ok) {
        ++bad;
        ADD_FAILURE() << what << " element " << e << " (row " << std::int64_t(e) / cpu[i].ld << ", col "
                      << std::int64_t(e) % cpu[i].ld << "): CUDA " << g[e] << ", CPU " << w[e];
      }
    }
  }
  for (void* p : dev) EXPECT_EQ(cudaFree(p), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(CudaBackendOps, CudaKernelsMatchCpuKernels) {
  std::string why;
  if (!ymlopt::nn::cuda::device_available(&why)) GTEST_SKIP() << why;
  for (const Case& k : cases()) {
    SCOPED_TRACE(k.component + " " + k.label);
    run_case(k);
  }
}

TEST(CudaBackendOps, CudaChecksSendUnsupportedTasksToTheCpu) {
  // host-side: no device needed
  auto reject = [](const std::string& name, std::vector<HostPort> ports, std::map<std::string, std::string> args,
                   const std::string& expect) {
    const ComponentSpec& spec = registry().get(name);
    ASSERT_TRUE(spec.cuda_check) << name;
    const auto views = host_views(ports);
    const ymlopt::Args a = ymlopt::test::make_args(spec, args);
    EXPECT_EQ(spec.check(ymlopt::TaskShape{views, a}), "") << name << ": the task itself is valid";
    const std::string m = spec.cuda_check(ymlopt::TaskShape{views, a});
    EXPECT_NE(m.find(expect), std::string::npos) << name << ": '" << m << "'";
  };
  HostPort x64 = make_port(DType::f64, 3, 4), y64 = make_port(DType::f64, 3, 4);
  reject("nn.softmax", {x64, y64}, {}, "f32 only");
  reject("nn.gelu", {f32(3, 4, 1, 2), out_f32(3, 4)}, {}, "contiguous");
  reject("nn.layernorm", {f32(3, 4, 1), HostPort{}, HostPort{}, out_f32(3, 4, 1)}, {}, "contiguous");
  reject("blas.gemm", {make_port(DType::f64, 2, 3), make_port(DType::f64, 3, 2), make_port(DType::f64, 2, 2)}, {},
         "f32 only");
  reject("nn.linear",
         {f32(3, 4, 1), f32(4, 5, 2), vec_f32(5, 3), out_f32(3, 5), HostPort{}, HostPort{}, HostPort{}, HostPort{},
          HostPort{}},
         {}, "no bias");
  {
    HostPort scale = positive_f32(1, 6, 4, 0.1f, 0.2f);
    scale.shape = {6};
    reject("nn.linear",
           {f32(3, 8, 1), codes(6, 8, 2), HostPort{}, out_f32(3, 6), HostPort{}, scale, HostPort{}, HostPort{},
            HostPort{}},
           {{"format", "int8"}}, "must be multiples of 4");
  }
  reject("nn.attention", {f32(4, 256, 1), f32(4, 256, 2), f32(4, 256, 3), out_f32(4, 256)}, {{"heads", "1"}},
         "head_dim 256 is not in [1, 128]");
  {
    HostPort table = codes(10, 8, 3), scale = positive_f32(1, 10, 4, 0.1f, 0.2f);
    scale.shape = {10};
    reject("nn.embedding", {ids(4, 10, 5, false), table, out_f32(4, 8), scale, HostPort{}, HostPort{}, HostPort{}}, {{"format", "int8"}},
           "format=dense only");
  }
  {
    HostPort s16 = make_port(DType::f16, 1, 4);
    s16.shape = {4};
    reject("quant.dequant", {codes(4, 8, 6), s16, HostPort{}, out_f32(4, 8)}, {{"bits", "8"}, {"group", "0"}},
           "f32 scale and zero");
  }
}

TEST(CudaBackendOps, CudaKernelsValidateBeforeTouchingData) {
  // A CUDA KernelFn validates its views like the CPU kernel and throws
  // KernelError before any device access: host pointers are safe here.
  const ComponentSpec& spec = registry().get("nn.softmax");
  std::vector<HostPort> ports = {make_port(DType::f64, 2, 3), make_port(DType::f64, 2, 3)};
  CudaContext ctx(spec, host_views(ports), {}, nullptr);
  try {
    spec.cuda(ctx);
    FAIL() << "an f64 task reached the f32 CUDA kernel";
  } catch (const ymlopt::KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("f32 only"), std::string::npos) << e.what();
  }
  const ComponentSpec& att = registry().get("nn.attention");
  std::vector<HostPort> bad = {f32(6, 8, 1), f32(6, 8, 2), f32(6, 8, 3), out_f32(5, 8)};
  CudaContext actx(att, host_views(bad), {{"heads", "2"}}, nullptr);
  EXPECT_THROW(att.cuda(actx), ymlopt::KernelError);  // y has 5 rows, q 6: the CPU check's message
}
#else
TEST(CudaBackendOps, BuiltWithoutCuda) { GTEST_SKIP() << "built without CUDA kernels: no nvcc found (cmake/cuda.cmake)"; }
#endif

}  // namespace
