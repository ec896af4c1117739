// The OpenCL side of the test-backend-ops harness (like tests/unit/cuda's):
// for every registered component with an OpenCL kernel (ComponentSpec::opencl),
// a few cases (odd sizes, strided tiles with ld > cols, several dtypes, args)
// run twice on the same random inputs: the CPU kernel on host buffers, and the
// OpenCL kernel on device buffers, each port placed a few elements into its
// buffer (KernelContext::opencl_offset). Every written port is compared, its
// padding included (a kernel must not write outside its view). Without an
// OpenCL device the device cases skip with the reason; with PoCL installed
// they run (OpenclDevice.PoclInstalledMeansADevice).
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
#include <ymlopt/kernel_util.hpp>

#if YMLOPT_HAVE_OPENCL
#include "opencl/opencl.hpp"
#include "test_device.hpp"
#endif
#if YMLOPT_HAVE_CLBLAST
#include "opencl/clblast.hpp"
#endif

namespace {

using ymlopt::Access;
using ymlopt::ComponentSpec;
using ymlopt::DType;
using ymlopt::TensorView;
using ymlopt::test::TestRegistry;

/// The components this build attaches an OpenCL kernel to (blas and nn.linear: through CLBlast).
const std::set<std::string> kOpenclComponents = {"tensor.fill", "tensor.copy", "tensor.add", "tensor.scale",
    "nn.gelu", "nn.silu", "nn.softmax", "nn.layernorm", "nn.rmsnorm", "nn.swiglu", "nn.rope", "nn.embedding",
    "nn.attention",
#if YMLOPT_HAVE_CLBLAST
    "blas.gemm", "blas.syrk", "blas.trsm", "nn.linear",
#endif
};


/// One port's host data: [rows, cols] with leading dimension ld; padding and
/// outputs hold a sentinel (bytes 0x4d) before the run. Default: an unbound
/// optional port. `vector`: shape [cols] (one row).
struct HostPort {
  DType dtype = DType::f32;
  std::int64_t rows = 0, cols = 0, ld = 0;
  std::vector<unsigned char> bytes;
  bool vector = false;

  bool bound() const { return rows > 0 || cols > 0; }
  TensorView view(void* data) const {
    TensorView v;
    if (!bound()) return v;
    v.data = data;
    v.dtype = dtype;
    v.rows = rows;
    v.cols = cols;
    v.ld = ld;
    v.shape = vector ? ymlopt::Shape{cols} : ymlopt::Shape{rows, cols};
    return v;
  }
};

HostPort out(DType dt, std::int64_t rows, std::int64_t cols, std::int64_t pad = 0) {
  HostPort p;
  p.dtype = dt;
  p.rows = rows;
  p.cols = cols;
  p.ld = cols + pad;
  p.bytes.assign(std::size_t(std::max<std::int64_t>(rows * p.ld, 1)) * ymlopt::dtype_size(dt), 0x4d);
  return p;
}

/// Random values in [-scale, scale], stored in dtype dt (integers rounded).
HostPort random(DType dt, std::int64_t rows, std::int64_t cols, std::uint32_t seed, std::int64_t pad = 0,
                double scale = 1) {
  HostPort p = out(dt, rows, cols, pad);
  std::mt19937 g(seed);
  std::uniform_real_distribution<double> u(-scale, scale);
  ymlopt::kutil::dispatch_any(dt, [&](auto tg) {
    using T = typename decltype(tg)::type;
    auto* e = reinterpret_cast<T*>(p.bytes.data());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t c = 0; c < cols; ++c) e[r * p.ld + c] = ymlopt::kutil::from_double<T>(u(g));
  });
  return p;
}

/// A [n] vector (shape [n]) of random f32 values.
HostPort random_vector(std::int64_t n, std::uint32_t seed, double scale = 1) {
  HostPort p = random(DType::f32, 1, n, seed, 0, scale);
  p.vector = true;
  return p;
}

/// n token ids in [0, vocab), the first two 0 and vocab - 1 (the table's ends):
/// a [n] vector, or with `column` a [n, 1] column of leading dimension 1 + pad.
HostPort token_ids(std::int64_t n, std::int64_t vocab, std::uint32_t seed, bool column = false, std::int64_t pad = 0) {
  HostPort p = column ? out(DType::i32, n, 1, pad) : out(DType::i32, 1, n);
  p.vector = !column;
  std::mt19937 g(seed);
  auto* e = reinterpret_cast<std::int32_t*>(p.bytes.data());
  for (std::int64_t i = 0; i < n; ++i)
    e[column ? i * p.ld : i] = i == 0 ? 0 : i == 1 ? std::int32_t(vocab - 1) : std::int32_t(g() % vocab);
  return p;
}

/// A random n x n matrix, well conditioned as either triangle: n added to the
/// diagonal, or with a unit diagonal the other entries scaled to [-1/n, 1/n].
HostPort triangular(DType dt, std::int64_t n, std::uint32_t seed, std::int64_t pad, bool unit) {
  HostPort p = random(dt, n, n, seed, pad, unit ? 1.0 / double(n) : 1.0);
  ymlopt::kutil::dispatch_float(dt, [&](auto tg) {
    using T = typename decltype(tg)::type;
    auto* e = reinterpret_cast<T*>(p.bytes.data());
    for (std::int64_t i = 0; !unit && i < n; ++i) e[i * p.ld + i] += T(n);
  });
  return p;
}

struct Case {
  std::string component;
  std::string label;
  std::vector<HostPort> ports;
  std::map<std::string, std::string> args;
  double tol;  // |cl - cpu| <= tol * max(1, |cpu|) per element (f32, f64); 0: bit-exact
};

void add_nn_cases(std::vector<Case>& c);
#if YMLOPT_HAVE_CLBLAST
std::string dims_label(std::int64_t a, std::int64_t b, std::int64_t c) {
  return std::to_string(a) + "x" + std::to_string(b) + "x" + std::to_string(c);
}
const char* dtype_label(DType dt) { return dt == DType::f32 ? " f32" : " f64"; }
double gemm_tol(DType dt) { return dt == DType::f32 ? 1e-4 : 1e-10; }

/// blas.gemm: every transpose pair at odd sizes, f32 and f64, ld > cols on
/// some ports, alpha and beta not 0 or 1; and one beta = 0 (c overwritten).
void add_gemm_cases(std::vector<Case>& c, std::uint32_t& seed) {
  const std::int64_t sizes[][3] = {{1, 1, 1}, {7, 13, 5}, {65, 33, 129}};  // m, n, k
  int v = 0;
  for (DType dt : {DType::f32, DType::f64})
    for (const auto& d : sizes)
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          const std::int64_t m = d[0], n = d[1], k = d[2], pa = v % 3, pb = (v + 1) % 3 * 2, pc = v % 2 * 5;
          ++v;
          HostPort a = ta ? random(dt, k, m, seed++, pa) : random(dt, m, k, seed++, pa);
          HostPort b = tb ? random(dt, n, k, seed++, pb) : random(dt, k, n, seed++, pb);
          const std::string l = dims_label(m, n, k) + (ta ? " A^T" : " A") + (tb ? " B^T" : " B") + " pads " +
                                std::to_string(pa) + "," + std::to_string(pb) + "," + std::to_string(pc) + dtype_label(dt);
          c.push_back({"blas.gemm", l, {a, b, random(dt, m, n, seed++, pc)},
                       {{"transa", ta ? "true" : "false"}, {"transb", tb ? "true" : "false"}, {"alpha", "0.75"}, {"beta", "-1.25"}},
                       gemm_tol(dt)});
        }
  c.push_back({"blas.gemm", "9x11x17 beta 0 f32",
               {random(DType::f32, 9, 17, seed++, 2), random(DType::f32, 17, 11, seed++), random(DType::f32, 9, 11, seed++, 1)},
               {{"alpha", "-2"}, {"beta", "0"}}, 1e-4});
}

/// blas.syrk: lower and upper, A A^T and A^T A, odd sizes, f32 and f64.
void add_syrk_cases(std::vector<Case>& c, std::uint32_t& seed) {
  const std::int64_t sizes[][2] = {{1, 1}, {7, 5}, {65, 33}, {13, 129}};  // n, k
  int v = 0;
  for (DType dt : {DType::f32, DType::f64})
    for (const auto& d : sizes) {
      if (dt == DType::f64 && (d[0] == 1 || d[1] == 129)) continue;
      for (const char* uplo : {"lower", "upper"})
        for (bool tr : {false, true}) {
          const std::int64_t n = d[0], k = d[1], pa = v % 3 * 2, pc = (v + 1) % 2 * 3;
          ++v;
          HostPort a = tr ? random(dt, k, n, seed++, pa) : random(dt, n, k, seed++, pa);
          const std::string l = std::to_string(n) + "x" + std::to_string(k) + " " + uplo + (tr ? " A^T A" : " A A^T") +
                                " pads " + std::to_string(pa) + "," + std::to_string(pc) + dtype_label(dt);
          c.push_back({"blas.syrk", l, {a, random(dt, n, n, seed++, pc)},
                       {{"uplo", uplo}, {"trans", tr ? "trans" : "notrans"}, {"alpha", "0.5"}, {"beta", "-1.5"}},
                       gemm_tol(dt)});
        }
    }
}

/// blas.trsm: every side, triangle, transpose and diagonal at 7x13; some at
/// 1x1 and 65x33 (several of CLBlast's 16-wide blocks); f64.
void add_trsm_cases(std::vector<Case>& c, std::uint32_t& seed) {
  struct Trsm {
    std::int64_t m, n;
    bool right, upper, trans, unit;
    DType dt;
  };
  std::vector<Trsm> t;
  for (int bits = 0; bits < 16; ++bits)
    t.push_back({7, 13, (bits & 1) != 0, (bits & 2) != 0, (bits & 4) != 0, (bits & 8) != 0, DType::f32});
  t.push_back({1, 1, false, false, false, false, DType::f32});
  t.push_back({1, 1, true, true, true, true, DType::f32});
  for (DType dt : {DType::f32, DType::f64}) {
    t.push_back({65, 33, false, false, false, false, dt});
    t.push_back({65, 33, true, true, true, true, dt});
    t.push_back({33, 65, false, true, true, false, dt});
    t.push_back({33, 65, true, false, false, true, dt});
  }
  int v = 0;
  for (const Trsm& k : t) {
    const std::int64_t na = k.right ? k.n : k.m, pa = v % 3, pb = (v + 2) % 3 * 2;
    ++v;
    const std::string l = std::to_string(k.m) + "x" + std::to_string(k.n) + (k.right ? " right" : " left") +
                          (k.upper ? " upper" : " lower") + (k.trans ? " trans" : " notrans") +
                          (k.unit ? " unit" : " nonunit") + " pads " + std::to_string(pa) + "," + std::to_string(pb) +
                          dtype_label(k.dt);
    c.push_back({"blas.trsm", l, {triangular(k.dt, na, seed++, pa, k.unit), random(k.dt, k.m, k.n, seed++, pb)},
                 {{"side", k.right ? "right" : "left"}, {"uplo", k.upper ? "upper" : "lower"},
                  {"trans", k.trans ? "trans" : "notrans"}, {"diag", k.unit ? "unit" : "nonunit"}, {"alpha", "1.5"}},
                 gemm_tol(k.dt)});
  }
}

/// nn.linear (dense f32): w as [k, n] and [n, k], bias or not, each
/// activation, a residual, strided x, w, y and r.
void add_linear_cases(std::vector<Case>& c, std::uint32_t& seed) {
  struct Linear {
    std::int64_t m, k, n;
    bool tw, bias, residual;
    const char* act;
    std::int64_t pad;
    double scale;  // of x: 4 reaches the activations' tails
  };
  const Linear ls[] = {
      {1, 1, 1, false, false, false, "none", 0, 1},      {7, 13, 5, false, false, false, "none", 2, 1},
      {65, 33, 129, false, false, false, "none", 3, 1},  {65, 33, 129, true, true, false, "none", 0, 1},
      {7, 13, 5, true, false, false, "none", 1, 1},      {7, 13, 5, false, true, false, "relu", 1, 1},
      {7, 13, 5, true, true, false, "gelu", 0, 4},       {65, 33, 129, false, true, false, "gelu", 2, 1},
      {7, 13, 5, false, true, false, "gelu_tanh", 3, 4}, {65, 33, 129, true, true, false, "gelu_tanh", 1, 1},
      {7, 13, 5, true, true, false, "silu", 2, 4},       {65, 33, 129, false, false, false, "silu", 0, 1},
      {7, 13, 5, false, false, true, "none", 1, 1},      {65, 33, 129, true, true, true, "none", 2, 1},
      {7, 13, 5, true, true, true, "gelu_tanh", 3, 1},   {65, 33, 129, false, false, true, "relu", 0, 4},
      {1, 1, 1, false, true, true, "silu", 0, 1},
  };
  for (const Linear& k : ls) {
    const DType f = DType::f32;
    std::vector<HostPort> p(9);
    p[0] = random(f, k.m, k.k, seed++, k.pad, k.scale);
    p[1] = k.tw ? random(f, k.n, k.k, seed++, k.pad + 1) : random(f, k.k, k.n, seed++, k.pad + 1);
    if (k.bias) p[2] = random(f, 1, k.n, seed++);
    p[3] = out(f, k.m, k.n, k.pad * 2);
    if (k.residual) p[4] = random(f, k.m, k.n, seed++, k.pad);
    const std::string l = dims_label(k.m, k.k, k.n) + (k.tw ? " w [n,k]" : " w [k,n]") + (k.bias ? " bias" : "") +
                          (k.residual ? " residual" : "") + " " + k.act + " pad " + std::to_string(k.pad);
    c.push_back({"nn.linear", l, p, {{"transpose_w", k.tw ? "true" : "false"}, {"activation", k.act}}, 1e-4});
  }
}
#endif

/// The cases: odd sizes, strided tiles (ld > cols), a row broadcast, several dtypes.
std::vector<Case> cases() {
  std::vector<Case> c;
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1}, {7, 33}, {64, 1000}, {1, 257}};
  std::uint32_t seed = 1;
  for (auto [r, n] : shapes) {
    const std::string l = std::to_string(r) + "x" + std::to_string(n);
    c.push_back({"tensor.fill", l + " f32", {out(DType::f32, r, n)}, {{"value", "-2.5"}}, 0});
    c.push_back({"tensor.copy", l + " f32", {random(DType::f32, r, n, seed++), out(DType::f32, r, n)}, {}, 0});
    c.push_back({"tensor.scale", l + " f32", {random(DType::f32, r, n, seed++, 0, 8)}, {{"alpha", "0.37"}}, 0});
    c.push_back({"tensor.add", l + " f32",
                 {random(DType::f32, r, n, seed++), random(DType::f32, r, n, seed++), out(DType::f32, r, n)},
                 {{"alpha", "1.5"}, {"beta", "-0.25"}}, 1e-5});
  }
  // strided tiles: ld > cols on every port, different paddings
  c.push_back({"tensor.fill", "13x29 ld 32 f32", {out(DType::f32, 13, 29, 3)}, {{"value", "7"}}, 0});
  c.push_back({"tensor.copy", "13x29 ld 31 -> ld 34 f32",
               {random(DType::f32, 13, 29, seed++, 2), out(DType::f32, 13, 29, 5)}, {}, 0});
  c.push_back({"tensor.scale", "17x45 ld 50 f32", {random(DType::f32, 17, 45, seed++, 5, 3)}, {{"alpha", "-1.75"}}, 0});
  c.push_back({"tensor.add", "11x37 strided f32",
               {random(DType::f32, 11, 37, seed++, 1), random(DType::f32, 11, 37, seed++, 4), out(DType::f32, 11, 37, 2)},
               {}, 1e-5});
  c.push_back({"tensor.add", "9x65 bias row strided f32",
               {random(DType::f32, 9, 65, seed++, 3), random(DType::f32, 1, 65, seed++), out(DType::f32, 9, 65, 7)},
               {{"alpha", "2"}, {"beta", "0.5"}}, 1e-5});
  // other dtypes: fill and copy move bits of every size; scale and add in f64
  c.push_back({"tensor.fill", "5x7 ld 9 f16", {out(DType::f16, 5, 7, 2)}, {{"value", "0.1"}}, 0});
  c.push_back({"tensor.fill", "3x11 bf16", {out(DType::bf16, 3, 11)}, {{"value", "-3.3"}}, 0});
  c.push_back({"tensor.fill", "6x5 ld 8 i8 saturated", {out(DType::i8, 6, 5, 3)}, {{"value", "300"}}, 0});
  c.push_back({"tensor.fill", "4x9 i32", {out(DType::i32, 4, 9)}, {{"value", "-12.5"}}, 0});
  c.push_back({"tensor.fill", "3x17 ld 20 f64", {out(DType::f64, 3, 17, 3)}, {{"value", "0.1"}}, 0});
  c.push_back({"tensor.copy", "5x33 ld 35 -> 37 i8", {random(DType::i8, 5, 33, seed++, 2, 100), out(DType::i8, 5, 33, 4)}, {}, 0});
  c.push_back({"tensor.copy", "6x21 ld 22 f16", {random(DType::f16, 6, 21, seed++, 1), out(DType::f16, 6, 21)}, {}, 0});
  c.push_back({"tensor.copy", "7x19 ld 20 -> 23 f64", {random(DType::f64, 7, 19, seed++, 1), out(DType::f64, 7, 19, 4)}, {}, 0});
  c.push_back({"tensor.scale", "9x31 ld 33 f64", {random(DType::f64, 9, 31, seed++, 2)}, {{"alpha", "0.3"}}, 0});
  c.push_back({"tensor.add", "8x15 bias f64",
               {random(DType::f64, 8, 15, seed++, 1), random(DType::f64, 1, 15, seed++), out(DType::f64, 8, 15, 2)},
               {{"alpha", "0.7"}, {"beta", "1.1"}}, 1e-12});
  add_nn_cases(c);
#if YMLOPT_HAVE_CLBLAST
  add_gemm_cases(c, seed);
  add_syrk_cases(c, seed);
  add_trsm_cases(c, seed);
  add_linear_cases(c, seed);
#endif
  return c;
}

void add_nn_elementwise_cases(std::vector<Case>& c, std::uint32_t& seed) {
  const DType f = DType::f32;
  const HostPort none;  // an unbound optional port
  const std::pair<std::int64_t, std::int64_t> shapes[] = {{1, 1}, {7, 33}, {1, 257}, {64, 1000}};
  for (auto [r, n] : shapes) {
    const std::string l = std::to_string(r) + "x" + std::to_string(n);
    c.push_back({"nn.gelu", l + " tanh", {random(f, r, n, seed++, 0, 4), out(f, r, n)}, {{"approximate", "tanh"}},
                 1e-5});
    c.push_back({"nn.gelu", l + " erf", {random(f, r, n, seed++, 0, 4), out(f, r, n)}, {{"approximate", "none"}},
                 1e-5});
    c.push_back({"nn.silu", l, {random(f, r, n, seed++, 0, 8), out(f, r, n)}, {}, 1e-5});
    c.push_back({"nn.softmax", l, {random(f, r, n, seed++, 0, 8), out(f, r, n)}, {}, 1e-5});
    c.push_back({"nn.swiglu", l, {random(f, r, n, seed++, 0, 6), random(f, r, n, seed++, 0, 2), out(f, r, n)}, {},
                 1e-5});
    c.push_back({"nn.layernorm", l + " gamma beta",
                 {random(f, r, n, seed++, 0, 3), random_vector(n, seed++), random_vector(n, seed++), out(f, r, n)}, {},
                 1e-5});
    c.push_back({"nn.rmsnorm", l + " weight", {random(f, r, n, seed++, 0, 3), random_vector(n, seed++), out(f, r, n)},
                 {}, 1e-5});
  }
  // strided ports (ld > cols, each its own padding), and the optional ports left out
  c.push_back({"nn.gelu", "13x29 ld 32 -> 35 tanh", {random(f, 13, 29, seed++, 3, 4), out(f, 13, 29, 6)}, {}, 1e-5});
  c.push_back({"nn.gelu", "9x70 ld 71 -> 77 erf", {random(f, 9, 70, seed++, 1, 4), out(f, 9, 70, 7)},
               {{"approximate", "none"}}, 1e-5});
  c.push_back({"nn.silu", "11x37 ld 40 -> 38", {random(f, 11, 37, seed++, 3, 30), out(f, 11, 37, 1)}, {}, 1e-5});
  c.push_back({"nn.softmax", "5x4099 ld 4100 -> 4107, |x| <= 30",
               {random(f, 5, 4099, seed++, 1, 30), out(f, 5, 4099, 8)}, {}, 1e-5});
  c.push_back({"nn.swiglu", "6x45 strided",
               {random(f, 6, 45, seed++, 2, 6), random(f, 6, 45, seed++, 5), out(f, 6, 45, 3)}, {}, 1e-5});
  c.push_back({"nn.layernorm", "5x257 ld 260 -> 258 gamma, eps 1e-3",
               {random(f, 5, 257, seed++, 3, 3), random_vector(257, seed++), none, out(f, 5, 257, 1)},
               {{"eps", "1e-3"}}, 1e-5});
  c.push_back({"nn.layernorm", "17x96 beta",
               {random(f, 17, 96, seed++, 0, 5), none, random_vector(96, seed++), out(f, 17, 96, 4)}, {}, 1e-5});
  c.push_back({"nn.layernorm", "3x16 ld 19", {random(f, 3, 16, seed++, 3), none, none, out(f, 3, 16)}, {}, 1e-5});
  c.push_back({"nn.rmsnorm", "12x4097 ld 4099 -> 4098, eps 0.1",
               {random(f, 12, 4097, seed++, 2, 3), none, out(f, 12, 4097, 1)}, {{"eps", "0.1"}}, 1e-5});
}

void add_nn_rope_cases(std::vector<Case>& c, std::uint32_t& seed) {
  const DType f = DType::f32;
  const HostPort none;  // positions: unbound (the OpenCL kernel takes offsets only)
  c.push_back({"nn.rope", "7x16 half, 2 heads", {random(f, 7, 16, seed++, 0, 2), none}, {{"heads", "2"}}, 1e-5});
  c.push_back({"nn.rope", "15x18 ld 23 interleaved, 3 heads, seq 5, offset 3", {random(f, 15, 18, seed++, 5, 2), none},
               {{"heads", "3"}, {"seq", "5"}, {"offset", "3"}, {"style", "interleaved"}}, 1e-5});
  c.push_back({"nn.rope", "33x512 half, 8 heads, rotary_dim 32, offset 1000, base 5e5",
               {random(f, 33, 512, seed++, 0, 2), none},
               {{"heads", "8"}, {"rotary_dim", "32"}, {"offset", "1000"}, {"base", "500000"}}, 1e-5});
  c.push_back({"nn.rope", "1x10 interleaved, rotary_dim 4, offset 100000", {random(f, 1, 10, seed++), none},
               {{"heads", "1"}, {"rotary_dim", "4"}, {"offset", "100000"}, {"style", "interleaved"}}, 1e-5});
  c.push_back({"nn.rope", "9x512 ld 520 half, 4 heads, offset 2^24 - 16", {random(f, 9, 512, seed++, 8, 2), none},
               {{"heads", "4"}, {"offset", "16777200"}}, 1e-5});
  c.push_back({"nn.rope", "20x64 interleaved, 2 heads, seq 4, offset 7, rotary_dim 30",
               {random(f, 20, 64, seed++, 0, 2), none},
               {{"heads", "2"}, {"seq", "4"}, {"offset", "7"}, {"rotary_dim", "30"}, {"style", "interleaved"}}, 1e-5});
}

void add_nn_embedding_cases(std::vector<Case>& c, std::uint32_t& seed) {
  const HostPort none;
  // n ids (a column of leading dimension 1 + ids_pad, or a vector), a [vocab, d] table padded by pad, y by pad + 1
  auto emb = [&](std::string l, std::int64_t n, bool column, std::int64_t ids_pad, DType dt, std::int64_t vocab,
                 std::int64_t d, std::int64_t pad) {
    c.push_back({"nn.embedding", std::move(l),
                 {token_ids(n, vocab, seed, column, ids_pad), random(dt, vocab, d, seed + 1, pad),
                  out(dt, n, d, pad + 1), none, none, none, none},
                 {}, 0});
    seed += 2;
  };
  emb("11 ids, 50x33 f32", 11, false, 0, DType::f32, 50, 33, 0);
  emb("9 ids in a column of ld 3, 20x7 ld 8 f16 -> ld 9", 9, true, 2, DType::f16, 20, 7, 1);
  emb("1 id, 5x257 f64", 1, false, 0, DType::f64, 5, 257, 0);
  emb("40 ids, 30x16 ld 19 bf16 -> ld 20", 40, false, 0, DType::bf16, 30, 16, 3);
  emb("64 ids in a column, 1000x64 f32", 64, true, 0, DType::f32, 1000, 64, 0);
}

void add_nn_attention_cases(std::vector<Case>& c, std::uint32_t& seed) {
  // t tokens, heads and kv heads of dh; q, k, v and y padded by pad, pad + 1, ...
  auto att = [&](std::string l, std::int64_t t, std::int64_t heads, std::int64_t kv, std::int64_t dh,
                 std::map<std::string, std::string> args, std::int64_t pad) {
    args["heads"] = std::to_string(heads);
    args["kv_heads"] = std::to_string(kv);
    const DType f = DType::f32;
    c.push_back({"nn.attention", std::move(l),
                 {random(f, t, heads * dh, seed++, pad), random(f, t, kv * dh, seed++, pad + 1),
                  random(f, t, kv * dh, seed++, pad + 2), out(f, t, heads * dh, pad + 3)},
                 std::move(args), 1e-4});
  };
  att("7 tokens, 2 heads of 8", 7, 2, 2, 8, {}, 0);
  att("seq 37 x 2, GQA 8/2 heads of 16, causal, strided", 74, 8, 2, 16, {{"seq", "37"}, {"causal", "true"}}, 3);
  att("seq 33, GQA 4/1 heads of 64, causal, scale 0.3", 33, 4, 1, 64, {{"causal", "true"}, {"scale", "0.3"}}, 0);
  att("seq 70 x 2, GQA 4/2 heads of 16, causal, window 9", 140, 4, 2, 16,
      {{"seq", "70"}, {"causal", "true"}, {"window", "9"}}, 1);
  att("seq 150, 2 heads of 32, causal, window 37", 150, 2, 2, 32, {{"causal", "true"}, {"window", "37"}}, 0);
  att("seq 129, 2 heads of 128, heads [1, 2), strided", 129, 2, 2, 128, {{"head_begin", "1"}, {"head_end", "2"}}, 5);
  att("seq 129, 2 heads of 128, causal", 129, 2, 2, 128, {{"causal", "true"}}, 0);
  att("seq 20, 1 head of 256, causal", 20, 1, 1, 256, {{"causal", "true"}}, 1);
  att("3 sequences of 1 token, 3 heads of 5", 3, 3, 3, 5, {{"seq", "1"}}, 0);
  att("seq 100, GQA 6/3 heads of 96, causal, heads [2, 5)", 100, 6, 3, 96,
      {{"causal", "true"}, {"head_begin", "2"}, {"head_end", "5"}}, 2);
  att("seq 300, 1 head of 64, causal", 300, 1, 1, 64, {{"causal", "true"}}, 0);
  att("seq 50 x 2, GQA 8/2 heads of 128, ld far above cols", 100, 8, 2, 128, {{"seq", "50"}}, 1536);
}

/// The nn cases (f32 math): odd sizes, strided ports, every argument variant.
void add_nn_cases(std::vector<Case>& c) {
  std::uint32_t seed = 1000;
  add_nn_elementwise_cases(c, seed);
  add_nn_rope_cases(c, seed);
  add_nn_embedding_cases(c, seed);
  add_nn_attention_cases(c, seed);
}

std::vector<TensorView> host_views(std::vector<HostPort>& ports) {
  std::vector<TensorView> v;
  for (HostPort& p : ports) v.push_back(p.view(p.bound() ? p.bytes.data() : nullptr));
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

TEST(OpenclBackendOps, AttachedComponentsMatchThisBuild) {
  std::set<std::string> with_opencl;
  for (const auto& [name, spec] : registry().specs)
    if (spec.opencl) with_opencl.insert(name);
#if YMLOPT_HAVE_OPENCL
  EXPECT_EQ(with_opencl, kOpenclComponents);
#else
  EXPECT_TRUE(with_opencl.empty()) << "an OpenCL kernel is attached in a build without OpenCL";
#endif
}

TEST(OpenclBackendOps, EveryOpenclComponentHasCasesTheOpenclKernelAccepts) {
  std::map<std::string, int> n_cases;
  for (Case& k : cases()) {
    const ComponentSpec& spec = registry().get(k.component);
    const auto views = host_views(k.ports);
    const ymlopt::Args args = ymlopt::test::make_args(spec, k.args);
    EXPECT_EQ(spec.check(ymlopt::TaskShape{views, args}), "") << k.component << " " << k.label;
    if (spec.opencl_check) {
      EXPECT_EQ(spec.opencl_check(ymlopt::TaskShape{views, args}), "") << k.component << " " << k.label;
    }
    ++n_cases[k.component];
  }
  for (const std::string& n : kOpenclComponents) EXPECT_GE(n_cases[n], 4) << n << " has too few harness cases";
}

#if YMLOPT_HAVE_OPENCL

using ymlopt::test::opencl_device;

/// A KernelContext whose ports are cl_mem buffers at byte offsets, on one queue.
class OpenclContext : public ymlopt::KernelContext {
 public:
  OpenclContext(const ComponentSpec& spec, std::vector<TensorView> ports, std::vector<std::size_t> offsets,
                const std::map<std::string, std::string>& args, cl_command_queue q)
      : ports_(std::move(ports)), offsets_(std::move(offsets)), args_(ymlopt::test::make_args(spec, args)), q_(q) {}
  std::span<const TensorView> ports() const override { return ports_; }
  const ymlopt::Args& args() const override { return args_; }
  void report(std::string, double) override {}
  const std::string& run_dir() const override { return dir_; }
  void* opencl_queue() const override { return q_; }
  std::size_t opencl_offset(std::size_t i) const override { return offsets_.at(i); }

 private:
  std::vector<TensorView> ports_;
  std::vector<std::size_t> offsets_;
  ymlopt::Args args_;
  cl_command_queue q_;
  std::string dir_ = ".";
};

#define CL_OK(call) ASSERT_EQ((call), CL_SUCCESS) << #call

/// Element e of a written port, as double (f32 and f64 ports).
double element(const HostPort& p, const std::vector<unsigned char>& bytes, std::size_t e) {
  if (p.dtype == DType::f32) return reinterpret_cast<const float*>(bytes.data())[e];
  return reinterpret_cast<const double*>(bytes.data())[e];
}

/// Compares a written port byte for byte (tol 0) or per element with tol.
void compare(const Case& k, const ComponentSpec& spec, std::size_t i, const HostPort& want,
             const std::vector<unsigned char>& got) {
  const std::string what = k.component + " " + k.label + " port '" + spec.ports[i].name + "'";
  const std::size_t es = ymlopt::dtype_size(want.dtype), n = want.bytes.size() / es;
  std::size_t bad = 0;
  for (std::size_t e = 0; e < n && bad < 5; ++e) {
    bool ok = std::memcmp(&got[e * es], &want.bytes[e * es], es) == 0;
    if (!ok && k.tol > 0) {
      const double g = element(want, got, e), w = element(want, want.bytes, e);
      ok = std::fabs(g - w) <= k.tol * std::max(1.0, std::fabs(w));
    }
    if (!ok) {
      ++bad;
      const bool fp = want.dtype == DType::f32 || want.dtype == DType::f64;
      ADD_FAILURE() << what << " element " << e << " (row " << std::int64_t(e) / want.ld << ", col "
                    << std::int64_t(e) % want.ld << ") differs from the CPU kernel's"
                    << (fp ? ": OpenCL " + std::to_string(element(want, got, e)) + ", CPU " +
                                 std::to_string(element(want, want.bytes, e))
                           : std::string());
    }
  }
}

/// A buffer holding a copy of p's bytes (p at offset 0); nullptr for an unbound port.
cl_mem upload(const ymlopt::test::OpenclDevice& d, const HostPort& p) {
  if (!p.bound()) return nullptr;
  cl_int err = CL_SUCCESS;
  cl_mem b = clCreateBuffer(d.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, p.bytes.size(),
                            const_cast<unsigned char*>(p.bytes.data()), &err);
  EXPECT_EQ(err, CL_SUCCESS);
  return b;
}

void release(const std::vector<cl_mem>& bufs) {
  for (cl_mem b : bufs) {
    if (b) {
      EXPECT_EQ(clReleaseMemObject(b), CL_SUCCESS);
    }
  }
}

/// Runs one case on both sides and compares every written port.
void run_case(const Case& k) {
  const auto& d = opencl_device();
  const ComponentSpec& spec = registry().get(k.component);
  ASSERT_NE(spec.opencl, nullptr) << k.component;
  std::vector<HostPort> cpu = k.ports;
  {
    ymlopt::test::TestContext ctx(spec, host_views(cpu), k.args);
    ASSERT_NO_THROW(ctx.run()) << k.component << " " << k.label << " (CPU)";
  }
  // each port 3 + i elements into its buffer: the kernels must honour opencl_offset
  std::vector<cl_mem> bufs;
  std::vector<std::size_t> offsets;
  std::vector<TensorView> views;
  for (std::size_t i = 0; i < k.ports.size(); ++i) {
    const HostPort& p = k.ports[i];
    if (!p.bound()) {  // an optional port left out: no buffer
      bufs.push_back(nullptr);
      offsets.push_back(0);
      views.push_back(p.view(nullptr));
      continue;
    }
    const std::size_t off = (3 + i) * ymlopt::dtype_size(p.dtype);
    cl_int err = CL_SUCCESS;
    cl_mem b = clCreateBuffer(d.context, CL_MEM_READ_WRITE, off + p.bytes.size(), nullptr, &err);
    CL_OK(err);
    CL_OK(clEnqueueWriteBuffer(d.queue, b, CL_TRUE, off, p.bytes.size(), p.bytes.data(), 0, nullptr, nullptr));
    bufs.push_back(b);
    offsets.push_back(off);
    views.push_back(p.view(b));
  }
  {
    OpenclContext ctx(spec, views, offsets, k.args, d.queue);
    EXPECT_NO_THROW(spec.opencl(ctx)) << k.component << " " << k.label << " (OpenCL)";
  }
  CL_OK(clFinish(d.queue));
  for (std::size_t i = 0; i < k.ports.size(); ++i) {
    if (spec.ports[i].access == Access::read || !k.ports[i].bound()) continue;
    std::vector<unsigned char> got(k.ports[i].bytes.size());
    CL_OK(clEnqueueReadBuffer(d.queue, bufs[i], CL_TRUE, offsets[i], got.size(), got.data(), 0, nullptr, nullptr));
    compare(k, spec, i, cpu[i], got);
  }
  release(bufs);
}

TEST(OpenclBackendOps, OpenclKernelsMatchCpuKernels) {
  const auto& d = opencl_device();
  if (!d.device) GTEST_SKIP() << d.why;
  const bool fp64 = ymlopt::opencl::device_info(d.device).fp64;
  int ran = 0;
  for (const Case& k : cases()) {
    const bool f64_math = k.ports[0].dtype == DType::f64 && k.component != "tensor.fill" && k.component != "tensor.copy";
    if (f64_math && !fp64) continue;  // the kernels then throw (opencl::dtype_support)
    SCOPED_TRACE(k.component + " " + k.label + " on " + d.name);
    run_case(k);
    ++ran;
  }
  EXPECT_GE(ran, 20);
}

TEST(OpenclBackendOps, AddInPlaceAndCopyOntoItself) {
  // c aliasing a (one buffer, one offset), and y = x: what the CPU kernels allow
  const auto& d = opencl_device();
  if (!d.device) GTEST_SKIP() << d.why;
  HostPort a = random(DType::f32, 5, 9, 90, 2), b = random(DType::f32, 5, 9, 91);
  HostPort want = a;
  {
    std::vector<TensorView> v = {want.view(want.bytes.data()), b.view(b.bytes.data()), want.view(want.bytes.data())};
    ymlopt::test::TestContext ctx(registry().get("tensor.add"), v);
    ctx.run();
  }
  cl_int err = CL_SUCCESS;
  cl_mem ab = clCreateBuffer(d.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, a.bytes.size(), a.bytes.data(), &err);
  CL_OK(err);
  cl_mem bb = clCreateBuffer(d.context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, b.bytes.size(), b.bytes.data(), &err);
  CL_OK(err);
  const ComponentSpec& add = registry().get("tensor.add");
  OpenclContext ctx(add, {a.view(ab), b.view(bb), a.view(ab)}, {0, 0, 0}, {}, d.queue);
  EXPECT_NO_THROW(add.opencl(ctx));
  const ComponentSpec& copy = registry().get("tensor.copy");
  OpenclContext same(copy, {a.view(ab), a.view(ab)}, {0, 0}, {}, d.queue);
  EXPECT_NO_THROW(copy.opencl(same));
  OpenclContext overlapping(copy, {a.view(ab), a.view(ab)}, {0, 4}, {}, d.queue);
  EXPECT_THROW(copy.opencl(overlapping), ymlopt::KernelError);
  std::vector<unsigned char> got(a.bytes.size());
  CL_OK(clEnqueueReadBuffer(d.queue, ab, CL_TRUE, 0, got.size(), got.data(), 0, nullptr, nullptr));
  compare(Case{"tensor.add", "in place", {}, {}, 1e-5}, add, 2, want, got);
  clReleaseMemObject(ab);
  clReleaseMemObject(bb);
}

TEST(OpenclBackendOps, OpenclChecksSendConversionsToTheCpu) {
  const ComponentSpec& copy = registry().get("tensor.copy");
  ASSERT_TRUE(copy.opencl_check);
  std::vector<HostPort> ports = {random(DType::f32, 3, 4, 1), out(DType::f16, 3, 4)};
  const auto views = host_views(ports);
  const ymlopt::Args args = ymlopt::test::make_args(copy, {});
  EXPECT_EQ(copy.check(ymlopt::TaskShape{views, args}), "");
  EXPECT_NE(copy.opencl_check(ymlopt::TaskShape{views, args}).find("does not convert dtypes (f32 -> f16)"),
            std::string::npos);
}

TEST(OpenclBackendOps, NnOpenclChecksSendWhatTheKernelsDoNotHandleToTheCpu) {
  struct Refused {
    std::string component;
    std::vector<HostPort> ports;
    std::map<std::string, std::string> args;
    std::string why;  // in the opencl_check message
  };
  const HostPort none;
  const DType f = DType::f32, d = DType::f64;
  HostPort scale = random_vector(10, 7);
  const std::vector<Refused> refused = {
      {"nn.gelu", {random(d, 3, 4, 1), out(d, 3, 4)}, {}, "f32 only"},
      {"nn.silu", {random(d, 3, 4, 1), out(d, 3, 4)}, {}, "f32 only"},
      {"nn.softmax", {random(d, 3, 4, 1), out(d, 3, 4)}, {}, "f32 only"},
      {"nn.swiglu", {random(d, 3, 4, 1), random(d, 3, 4, 2), out(d, 3, 4)}, {}, "f32 only"},
      {"nn.layernorm", {random(d, 3, 4, 1), none, none, out(d, 3, 4)}, {}, "f32 only"},
      {"nn.rmsnorm", {random(d, 3, 4, 1), none, out(d, 3, 4)}, {}, "f32 only"},
      {"nn.rope", {random(d, 4, 8, 1), none}, {{"heads", "2"}}, "f32 only"},
      {"nn.rope", {random(f, 4, 8, 1), none}, {{"heads", "2"}, {"offset", "16777213"}}, "positions below 2^24"},
      {"nn.embedding",
       {token_ids(4, 10, 1), random(DType::i8, 10, 8, 2, 0, 100), out(f, 4, 8), scale, none, none, none},
       {{"format", "int8"}}, "dense tables only"},
      {"nn.attention", {random(d, 4, 16, 1), random(d, 4, 16, 2), random(d, 4, 16, 3), out(d, 4, 16)}, {{"heads", "2"}},
       "f32 only"},
      {"nn.attention", {random(f, 4, 264, 1), random(f, 4, 264, 2), random(f, 4, 264, 3), out(f, 4, 264)},
       {{"heads", "1"}}, "head dims up to 256"},
  };
  for (const Refused& r : refused) {
    SCOPED_TRACE(r.component + " " + r.why);
    const ComponentSpec& spec = registry().get(r.component);
    ASSERT_TRUE(spec.opencl_check);
    std::vector<HostPort> ports = r.ports;
    const auto views = host_views(ports);
    const ymlopt::Args args = ymlopt::test::make_args(spec, r.args);
    EXPECT_EQ(spec.check(ymlopt::TaskShape{views, args}), "");  // a task the CPU kernel runs
    const std::string why = spec.opencl_check(ymlopt::TaskShape{views, args});
    EXPECT_NE(why.find(r.why), std::string::npos) << why;
    // the OpenCL kernel refuses it too, before any OpenCL call (host pointers, no queue)
    OpenclContext ctx(spec, views, std::vector<std::size_t>(views.size(), 0), r.args, nullptr);
    try {
      spec.opencl(ctx);
      ADD_FAILURE() << "the OpenCL kernel ran a task its opencl_check refuses";
    } catch (const ymlopt::KernelError& e) {
      EXPECT_EQ(std::string(e.what()), why);
    }
  }
}

TEST(OpenclBackendOps, EmbeddingIdOutOfRangeIsTheCpuKernelsError) {
  // the device kernel leaves such rows unwritten, reads back the first bad position and throws what the CPU throws
  const auto& d = opencl_device();
  if (!d.device) GTEST_SKIP() << d.why;
  const ComponentSpec& spec = registry().get("nn.embedding");
  const HostPort none;
  for (const std::int32_t bad : {10, -1, 1 << 30}) {
    HostPort ids = token_ids(8, 10, 5);
    reinterpret_cast<std::int32_t*>(ids.bytes.data())[5] = bad;
    reinterpret_cast<std::int32_t*>(ids.bytes.data())[7] = -7;
    std::vector<HostPort> ports = {ids, random(DType::f32, 10, 6, 6), out(DType::f32, 8, 6), none, none, none, none};
    std::string cpu_error;
    try {
      std::vector<HostPort> cpu = ports;
      ymlopt::test::TestContext ctx(spec, host_views(cpu));
      ctx.run();
    } catch (const ymlopt::KernelError& e) {
      cpu_error = e.what();
    }
    ASSERT_NE(cpu_error.find("id " + std::to_string(bad) + " at position 5 is out of range"), std::string::npos)
        << cpu_error;
    std::vector<cl_mem> bufs;
    std::vector<TensorView> views;
    for (const HostPort& p : ports) {
      bufs.push_back(upload(d, p));
      views.push_back(p.view(bufs.back()));
    }
    OpenclContext ctx(spec, views, std::vector<std::size_t>(views.size(), 0), {}, d.queue);
    try {
      spec.opencl(ctx);
      ADD_FAILURE() << "id " << bad << " reached no error";
    } catch (const ymlopt::KernelError& e) {
      EXPECT_EQ(std::string(e.what()), cpu_error);
    }
    CL_OK(clFinish(d.queue));
    release(bufs);
  }
}

TEST(OpenclBackendOps, NnKernelsInPlace) {
  // y bound to x's data (one buffer, one offset), as the CPU kernels allow
  const auto& d = opencl_device();
  if (!d.device) GTEST_SKIP() << d.why;
  const HostPort none;
  struct InPlace {
    std::string component;
    std::vector<HostPort> inputs;  // the ports before y; y is port 0's data
  };
  const std::vector<InPlace> runs = {
      {"nn.softmax", {random(DType::f32, 6, 300, 40, 3, 8)}},
      {"nn.gelu", {random(DType::f32, 5, 21, 41, 2, 4)}},
      {"nn.layernorm", {random(DType::f32, 4, 130, 42, 1, 3), random_vector(130, 43), random_vector(130, 44)}},
      {"nn.rmsnorm", {random(DType::f32, 4, 77, 45, 2, 3), none}},
      {"nn.swiglu", {random(DType::f32, 3, 50, 46, 1, 5), random(DType::f32, 3, 50, 47)}},
  };
  for (const InPlace& r : runs) {
    SCOPED_TRACE(r.component);
    const ComponentSpec& spec = registry().get(r.component);
    std::vector<HostPort> want = r.inputs;
    {
      std::vector<TensorView> v = host_views(want);
      v.push_back(v[0]);
      ymlopt::test::TestContext ctx(spec, v);
      ctx.run();
    }
    std::vector<cl_mem> bufs;
    std::vector<TensorView> views;
    for (const HostPort& p : r.inputs) {
      bufs.push_back(upload(d, p));
      views.push_back(p.view(bufs.back()));
    }
    views.push_back(views[0]);
    OpenclContext ctx(spec, views, std::vector<std::size_t>(views.size(), 0), {}, d.queue);
    EXPECT_NO_THROW(spec.opencl(ctx));
    std::vector<unsigned char> got(want[0].bytes.size());
    CL_OK(clEnqueueReadBuffer(d.queue, bufs[0], CL_TRUE, 0, got.size(), got.data(), 0, nullptr, nullptr));
    compare(Case{r.component, "in place", {}, {}, 1e-5}, spec, spec.ports.size() - 1, want[0], got);
    release(bufs);
  }
}

TEST(OpenclBackendOps, OpenclKernelsValidateBeforeTouchingData) {
  // validated like the CPU kernel before any OpenCL call: host pointers and no queue are safe here
  const ComponentSpec& add = registry().get("tensor.add");
  std::vector<HostPort> bad = {random(DType::f32, 4, 6, 1), random(DType::f32, 2, 6, 2), out(DType::f32, 4, 6)};
  OpenclContext ctx(add, host_views(bad), {0, 0, 0}, {}, nullptr);
  try {
    add.opencl(ctx);
    FAIL() << "a 2-row b reached the OpenCL add";
  } catch (const ymlopt::KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("single row"), std::string::npos) << e.what();
  }
  const ComponentSpec& copy = registry().get("tensor.copy");
  std::vector<HostPort> conv = {random(DType::f32, 3, 4, 1), out(DType::f64, 3, 4)};
  OpenclContext cctx(copy, host_views(conv), {0, 0}, {}, nullptr);
  EXPECT_THROW(copy.opencl(cctx), ymlopt::KernelError);
  const ComponentSpec& scale = registry().get("tensor.scale");
  std::vector<HostPort> x = {random(DType::f32, 3, 4, 1)};
  OpenclContext nq(scale, host_views(x), {0}, {}, nullptr);
  try {
    scale.opencl(nq);
    FAIL() << "ran without a queue";
  } catch (const ymlopt::KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("without a command queue"), std::string::npos) << e.what();
  }
}

#if YMLOPT_HAVE_CLBLAST
TEST(OpenclBackendOps, OpenclChecksSendUnhandledTasksToTheCpu) {
  // tasks the CPU kernel takes but the OpenCL one does not: opencl_check says why
  const auto reason = [](const char* component, std::vector<HostPort> ports,
                         const std::map<std::string, std::string>& args) {
    const ComponentSpec& spec = registry().get(component);
    const auto views = host_views(ports);
    const ymlopt::Args a = ymlopt::test::make_args(spec, args);
    EXPECT_EQ(spec.check(ymlopt::TaskShape{views, a}), "") << component;
    return spec.opencl_check ? spec.opencl_check(ymlopt::TaskShape{views, a}) : std::string("(no opencl_check)");
  };
  const DType f32 = DType::f32, f64 = DType::f64;
  std::vector<HostPort> lin(9);
  lin[0] = random(f64, 3, 8, 1);
  lin[1] = random(f64, 8, 4, 2);
  lin[3] = out(f64, 3, 4);
  EXPECT_NE(reason("nn.linear", lin, {}).find("f32 only, x is f64"), std::string::npos);
  lin[0] = random(f32, 3, 8, 1);
  lin[1] = random(DType::i8, 4, 8, 2, 0, 100);
  lin[3] = out(f32, 3, 4);
  lin[5] = random(f32, 4, 1, 3);
  EXPECT_NE(reason("nn.linear", lin, {{"format", "int8"}}).find("dense weights only: format=int8"), std::string::npos);
  EXPECT_NE(reason("blas.gemm", {out(f32, 3, 0), out(f32, 0, 4), random(f32, 3, 4, 4)}, {}).find("k = 0"),
            std::string::npos);
  EXPECT_NE(reason("blas.syrk", {out(f32, 5, 0), random(f32, 5, 5, 5)}, {}).find("k = 0"), std::string::npos);
  // f64 needs cl_khr_fp64: a device without it (simulated) is refused, and the kernels throw the reason
  ymlopt::opencl::DeviceInfo no_fp64;
  no_fp64.name = "a device without fp64";
  EXPECT_NE(ymlopt::opencl::dtype_support(no_fp64, f64).find("'a device without fp64' has no fp64"), std::string::npos);
  EXPECT_EQ(ymlopt::opencl::dtype_support(no_fp64, f32), "");
  no_fp64.fp64 = true;
  EXPECT_EQ(ymlopt::opencl::dtype_support(no_fp64, f64), "");
  EXPECT_NE(ymlopt::opencl::dtype_support(no_fp64, DType::f16), "");
}

/// A device buffer holding p's bytes.
cl_mem upload(const HostPort& p) {
  cl_int err = CL_SUCCESS;
  cl_mem b = clCreateBuffer(opencl_device().context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, p.bytes.size(),
                            const_cast<unsigned char*>(p.bytes.data()), &err);
  EXPECT_EQ(err, CL_SUCCESS);
  return b;
}

std::vector<unsigned char> download(cl_mem b, std::size_t bytes) {
  std::vector<unsigned char> got(bytes);
  EXPECT_EQ(clEnqueueReadBuffer(opencl_device().queue, b, CL_TRUE, 0, bytes, got.data(), 0, nullptr, nullptr),
            CL_SUCCESS);
  return got;
}

TEST(OpenclBackendOps, LinearResidualInPlace) {
  // r is y itself (one buffer, one offset): y += act(x W + b), as the CPU kernel does it
  const auto& d = opencl_device();
  if (!d.device) GTEST_SKIP() << d.why;
  const ComponentSpec& linear = registry().get("nn.linear");
  for (const char* act : {"none", "gelu", "silu"}) {
    const bool bias = std::string(act) != "silu";
    HostPort x = random(DType::f32, 9, 21, 70, 1, 3), w = random(DType::f32, 21, 14, 71), b = random(DType::f32, 1, 14, 72);
    HostPort y = random(DType::f32, 9, 14, 73, 2), want = y, none;
    {
      std::vector<TensorView> v = {x.view(x.bytes.data()), w.view(w.bytes.data()),
                                   bias ? b.view(b.bytes.data()) : none.view(nullptr), want.view(want.bytes.data()),
                                   want.view(want.bytes.data())};
      for (int i = 0; i < 4; ++i) v.push_back(none.view(nullptr));
      ymlopt::test::TestContext ctx(linear, v, {{"activation", act}});
      ASSERT_NO_THROW(ctx.run()) << act;
    }
    cl_mem xb = upload(x), wb = upload(w), bb = upload(b), yb = upload(y);
    std::vector<TensorView> v = {x.view(xb), w.view(wb), bias ? b.view(bb) : none.view(nullptr), y.view(yb), y.view(yb)};
    for (int i = 0; i < 4; ++i) v.push_back(none.view(nullptr));
    OpenclContext ctx(linear, v, std::vector<std::size_t>(9, 0), {{"activation", act}}, d.queue);
    EXPECT_NO_THROW(linear.opencl(ctx)) << act;
    compare(Case{"nn.linear", std::string("in place ") + act, {}, {}, 1e-4}, linear, 3, want,
            download(yb, y.bytes.size()));
    if (std::string(act) == "gelu") {  // r one element into y's tile: neither y nor apart
      OpenclContext shifted(linear, v, {0, 0, 0, 0, 4, 0, 0, 0, 0}, {{"activation", act}}, d.queue);
      try {
        linear.opencl(shifted);
        ADD_FAILURE() << "an r overlapping y ran";
      } catch (const ymlopt::KernelError& e) {
        EXPECT_NE(std::string(e.what()).find("'r' overlaps port 'y'"), std::string::npos) << e.what();
      }
    }
    for (cl_mem m : {xb, wb, bb, yb}) clReleaseMemObject(m);
  }
}

TEST(OpenclBackendOps, GemmBetaZeroOverwritesC) {
  // beta = 0: C is not read, so NaNs in it do not propagate (BLAS semantics, as the CPU kernel)
  const auto& d = opencl_device();
  if (!d.device) GTEST_SKIP() << d.why;
  const ComponentSpec& gemm = registry().get("blas.gemm");
  HostPort a = random(DType::f32, 6, 10, 80), b = random(DType::f32, 10, 7, 81), c = out(DType::f32, 6, 7, 1);
  std::fill_n(reinterpret_cast<float*>(c.bytes.data()), c.bytes.size() / 4, std::nanf(""));
  HostPort want = c;
  {
    ymlopt::test::TestContext ctx(gemm, {a.view(a.bytes.data()), b.view(b.bytes.data()), want.view(want.bytes.data())},
                                  {{"beta", "0"}});
    ASSERT_NO_THROW(ctx.run());
  }
  cl_mem ab = upload(a), bb = upload(b), cb = upload(c);
  OpenclContext ctx(gemm, {a.view(ab), b.view(bb), c.view(cb)}, {0, 0, 0}, {{"beta", "0"}}, d.queue);
  EXPECT_NO_THROW(gemm.opencl(ctx));
  compare(Case{"blas.gemm", "beta 0 over NaN", {}, {}, 1e-4}, gemm, 2, want, download(cb, c.bytes.size()));
  for (cl_mem m : {ab, bb, cb}) clReleaseMemObject(m);
}

TEST(OpenclBackendOps, ClblastFailuresNameTheCallAndStatus) {
  const auto& d = opencl_device();
  if (!d.device) GTEST_SKIP() << d.why;
  EXPECT_EQ(ymlopt::opencl::clblast_status_name(-1011), "CLBlastInsufficientMemoryA (-1011)");
  EXPECT_EQ(ymlopt::opencl::clblast_status_name(-7), "CLBlast status -7");
  // a buffer smaller than the view of port 'a': CLBlast refuses the call
  const ComponentSpec& gemm = registry().get("blas.gemm");
  HostPort a = random(DType::f32, 8, 8, 90), b = random(DType::f32, 8, 8, 91), c = out(DType::f32, 8, 8);
  HostPort small = random(DType::f32, 2, 2, 92);
  cl_mem ab = upload(small), bb = upload(b), cb = upload(c);
  OpenclContext ctx(gemm, {a.view(ab), b.view(bb), c.view(cb)}, {0, 0, 0}, {}, d.queue);
  try {
    gemm.opencl(ctx);
    ADD_FAILURE() << "CLBlast took a buffer too small for 'a'";
  } catch (const ymlopt::KernelError& e) {
    EXPECT_NE(std::string(e.what()).find("CLBlastSgemm: CLBlastInsufficientMemoryA (-1011)"), std::string::npos)
        << e.what();
  }
  clFinish(d.queue);
  for (cl_mem m : {ab, bb, cb}) clReleaseMemObject(m);
}
#endif  // YMLOPT_HAVE_CLBLAST
#else
TEST(OpenclBackendOps, BuiltWithoutOpencl) {
  GTEST_SKIP() << "built without OpenCL (cmake/opencl.cmake found none, or -DYMLOPT_OPENCL=OFF)";
}
#endif

}  // namespace
