// The raw CUDA kernels of nn (transformer_cuda), quant (quant_cuda) and
// sparse (sparse_cuda) against naive long-double (or exact integer) references
// on the host. Device tests skip without a GPU; the host-side argument checks
// (which throw before any CUDA call) run everywhere.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#if YMLOPT_HAVE_CUDA
#include <cuda_runtime.h>

#include "nn/nn_cuda.hpp"
#include "nn/transformer_cuda.hpp"
#include "quant/quant_cuda.hpp"
#include "sparse/sparse_cuda.hpp"
#endif

namespace {

#if YMLOPT_HAVE_CUDA
namespace nc = ymlopt::nn::cuda;
namespace qc = ymlopt::quant::cuda;
namespace sc = ymlopt::sparse::cuda;

#define SKIP_WITHOUT_DEVICE()                              \
  do {                                                     \
    std::string why;                                       \
    if (!nc::device_available(&why)) GTEST_SKIP() << why; \
  } while (0)

/// A device copy of a host vector, copied back with host().
template <class T> struct Dev {
  T* p = nullptr;
  std::size_t n = 0;
  explicit Dev(const std::vector<T>& h) : n(h.size()) {
    EXPECT_EQ(cudaMalloc(&p, std::max<std::size_t>(n, 1) * sizeof(T)), cudaSuccess);
    if (n) {
      EXPECT_EQ(cudaMemcpy(p, h.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  Dev(const Dev&) = delete;
  Dev& operator=(const Dev&) = delete;
  ~Dev() { cudaFree(p); }
  std::vector<T> host() const {
    std::vector<T> h(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (n) {
      EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return h;
  }
};

std::vector<float> rnd(std::size_t n, unsigned seed, float scale = 1.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

std::vector<std::int8_t> rnd_i8(std::size_t n, unsigned seed) {
  std::mt19937 g(seed);
  std::uniform_int_distribution<int> u(-128, 127);
  std::vector<std::int8_t> v(n);
  for (auto& x : v) x = static_cast<std::int8_t>(u(g));
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<long double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(double(got[i]), double(want[i]), tol * (1.0 + std::fabs(double(want[i])))) << "element " << i;
}

// ------------------------------------------------------------ host-side checks (run everywhere)

TEST(CudaKernelArgs, AttentionShapeErrors) {
  nc::AttentionShape s;
  s.batch = 1;
  s.seq = 8;
  s.heads = 2;
  s.kv_heads = 1;
  s.head_dim = 64;
  s.head_begin = 0;
  s.head_end = 2;
  s.ldq = s.ldy = 128;
  s.ldk = s.ldv = 64;
  EXPECT_EQ(nc::attention_shape_error(s), "");
  auto with = [&](auto f) {
    nc::AttentionShape t = s;
    f(t);
    return nc::attention_shape_error(t);
  };
  EXPECT_EQ(with([](auto& t) { t.head_dim = 129; }), "attention_f32: head_dim 129 is not in [1, 128]");
  EXPECT_NE(with([](auto& t) { t.kv_heads = 3; }).find("multiple of kv_heads 3"), std::string::npos);
  EXPECT_NE(with([](auto& t) { t.head_end = 3; }).find("head range [0, 3)"), std::string::npos);
  EXPECT_NE(with([](auto& t) { t.ldk = 63; }).find("ldk 63"), std::string::npos);
  EXPECT_NE(with([](auto& t) { t.batch = 70000; }).find("batch <= 65535"), std::string::npos);
  nc::AttentionShape bad = s;
  bad.head_dim = 0;
  EXPECT_THROW(nc::attention_f32(nullptr, nullptr, nullptr, nullptr, bad, false, 1.f, nullptr), std::invalid_argument);
}

TEST(CudaKernelArgs, EmbeddingAndRopeRejectBadSizes) {
  std::int64_t bad_id = 0;
  EXPECT_THROW(nc::embedding_f32(nullptr, 4, 0, 4, nullptr, 10, 8, 8, nullptr, 8, &bad_id, nullptr),
               std::invalid_argument);  // ids_cols 0
  EXPECT_THROW(nc::embedding_f32(nullptr, 4, 4, 4, nullptr, 10, 8, 7, nullptr, 8, &bad_id, nullptr),
               std::invalid_argument);  // table_ld < d
  EXPECT_EQ(nc::embedding_f32(nullptr, 0, 1, 1, nullptr, 10, 8, 8, nullptr, 8, &bad_id, nullptr), -1);  // no ids
  EXPECT_THROW(nc::rope_f32(nullptr, 2, 8, 1, 8, 5, 2, 0, 1e4, false, nullptr), std::invalid_argument);  // odd
  EXPECT_THROW(nc::rope_f32(nullptr, 2, 8, 1, 8, 10, 2, 0, 1e4, false, nullptr), std::invalid_argument);  // > dh
  EXPECT_THROW(nc::rope_f32(nullptr, 2, 7, 1, 8, 8, 2, 0, 1e4, false, nullptr), std::invalid_argument);  // ldx
  EXPECT_THROW(nc::rope_f32(nullptr, 2, 8, 1, 8, 8, 2, 0, 0.0, false, nullptr), std::invalid_argument);  // base
}

TEST(CudaKernelArgs, Int8GemmRequirements) {
  alignas(16) static std::int8_t buf[64];
  EXPECT_EQ(qc::gemm_i8_shape_error(buf, 8, buf, 8, buf, 4, 3, 4, 8), "");
  EXPECT_NE(qc::gemm_i8_shape_error(buf, 8, buf, 8, buf, 4, 3, 4, 6).find("multiples of 4"), std::string::npos);
  EXPECT_NE(qc::gemm_i8_shape_error(buf, 8, buf, 8, buf, 8, 3, 6, 8).find("n=6"), std::string::npos);
  EXPECT_NE(qc::gemm_i8_shape_error(buf, 10, buf, 8, buf, 4, 3, 4, 8).find("ldx=10"), std::string::npos);
  EXPECT_NE(qc::gemm_i8_shape_error(buf + 1, 8, buf, 8, buf, 4, 3, 4, 8).find("4-byte aligned"), std::string::npos);
  EXPECT_THROW(qc::gemm_i8_i32(nullptr, 8, nullptr, 8, nullptr, 4, 3, 4, 7, nullptr), std::invalid_argument);
  EXPECT_THROW(qc::linear_i8(nullptr, 2, 8, 8, nullptr, 8, nullptr, 6, nullptr, 6, nullptr), std::invalid_argument);
  EXPECT_THROW(qc::linear_i8(nullptr, 2, 8, 7, nullptr, 8, nullptr, 4, nullptr, 4, nullptr), std::invalid_argument);
  EXPECT_THROW(qc::quantize_rows_i8(nullptr, 2, 0, 1, nullptr, 1, nullptr, nullptr), std::invalid_argument);
  EXPECT_THROW(qc::scale_i32_f32(nullptr, 3, nullptr, nullptr, nullptr, 4, 2, 4, nullptr), std::invalid_argument);
}

TEST(CudaKernelArgs, GroupWeightErrors) {
  static const std::int8_t q[8] = {};
  static const float s[8] = {};
  qc::GroupWeight w;
  w.bits = 4;
  w.q = q;
  w.q_ld = 4;
  w.n = 2;
  w.k = 8;
  w.group = 4;
  w.scale = s;
  w.scale_ld = 2;
  EXPECT_EQ(qc::group_weight_error(w), "");
  qc::GroupWeight b = w;
  b.bits = 3;
  EXPECT_EQ(qc::group_weight_error(b), "dequantize_group: bits is 3, expected 4 or 8");
  b = w;
  b.group = 3;
  EXPECT_NE(qc::group_weight_error(b).find("not a multiple of group 3"), std::string::npos);
  b = w;
  b.k = 7;
  b.group = 0;
  EXPECT_NE(qc::group_weight_error(b).find("even k"), std::string::npos);
  b = w;
  b.q_ld = 3;
  EXPECT_NE(qc::group_weight_error(b).find("q_ld=3"), std::string::npos);
  b = w;
  b.scale_ld = 1;
  EXPECT_NE(qc::group_weight_error(b).find("scale_ld=1"), std::string::npos);
  EXPECT_THROW(qc::dequantize_group(b, nullptr, 8, nullptr), std::invalid_argument);
  EXPECT_THROW(qc::dequantize_group(w, nullptr, 7, nullptr), std::invalid_argument);  // ld_out < k
}

TEST(CudaKernelArgs, CsrLinearErrorsAndNm24Reason) {
  EXPECT_EQ(sc::csr_linear_shape_error(4, 5, 6, 3, 5, 4), "");
  EXPECT_NE(sc::csr_linear_shape_error(4, 5, 21, 3, 5, 4).find("nnz=21"), std::string::npos);
  EXPECT_NE(sc::csr_linear_shape_error(4, 5, 6, 3, 4, 4).find("ldx=4"), std::string::npos);
  EXPECT_NE(sc::csr_linear_shape_error(-1, 5, 0, 3, 5, 4).find("bad sizes"), std::string::npos);
  EXPECT_THROW(sc::csr_linear_f32(nullptr, nullptr, nullptr, 4, 5, 6, nullptr, 3, 5, nullptr, 3, nullptr),
               std::invalid_argument);
  EXPECT_NE(sc::nm24_unavailable_reason().find("cuSPARSELt"), std::string::npos);
}

// ------------------------------------------------------------ device tests (skip without a GPU)

/// Long-double attention of one layout, as nn.attention defines it.
std::vector<long double> attention_ref(const std::vector<float>& q, const std::vector<float>& k,
                                       const std::vector<float>& v, const nc::AttentionShape& s, bool causal,
                                       long double scale, std::vector<long double> out) {
  const std::int64_t group = s.heads / s.kv_heads, S = s.seq, dh = s.head_dim;
  for (std::int64_t b = 0; b < s.batch; ++b)
    for (std::int64_t h = s.head_begin; h < s.head_end; ++h) {
      const std::int64_t g = h / group;
      for (std::int64_t i = 0; i < S; ++i) {
        const std::int64_t lim = causal ? i + 1 : S, lo = s.window > 0 ? std::max<std::int64_t>(0, i - s.window + 1) : 0;
        std::vector<long double> p(static_cast<std::size_t>(lim), 0);
        long double mx = -INFINITY, sum = 0;
        for (std::int64_t j = lo; j < lim; ++j) {
          long double d = 0;
          for (std::int64_t c = 0; c < dh; ++c)
            d += (long double)q[static_cast<std::size_t>((b * S + i) * s.ldq + h * dh + c)] * k[static_cast<std::size_t>((b * S + j) * s.ldk + g * dh + c)];
          p[static_cast<std::size_t>(j)] = d * scale;
          mx = std::max(mx, p[static_cast<std::size_t>(j)]);
        }
        for (std::int64_t j = lo; j < lim; ++j) sum += (p[static_cast<std::size_t>(j)] = std::exp(p[static_cast<std::size_t>(j)] - mx));
        for (std::int64_t c = 0; c < dh; ++c) {
          long double acc = 0;
          for (std::int64_t j = lo; j < lim; ++j) acc += p[static_cast<std::size_t>(j)] * v[static_cast<std::size_t>((b * S + j) * s.ldv + g * dh + c)];
          out[static_cast<std::size_t>((b * S + i) * s.ldy + h * dh + c)] = acc / sum;
        }
      }
    }
  return out;
}

TEST(CudaKernels, AttentionMatchesLongDouble) {
  SKIP_WITHOUT_DEVICE();
  struct Conf {
    std::int64_t batch, seq, heads, kv, dh, hb, he, pad;
    bool causal;
    std::int64_t window;
  };
  for (const Conf& f : {Conf{2, 37, 2, 2, 16, 0, 2, 0, true, 0}, Conf{1, 100, 4, 2, 64, 1, 4, 3, false, 0},
                        Conf{1, 65, 1, 1, 128, 0, 1, 0, true, 0}, Conf{3, 5, 3, 1, 3, 0, 3, 1, false, 0},
                        Conf{1, 1, 2, 2, 8, 0, 2, 0, true, 0}, Conf{2, 100, 4, 2, 32, 0, 4, 1, true, 7},
                        Conf{1, 70, 2, 2, 16, 0, 2, 0, true, 33}}) {
    nc::AttentionShape s;
    s.batch = f.batch;
    s.seq = f.seq;
    s.heads = f.heads;
    s.kv_heads = f.kv;
    s.head_dim = f.dh;
    s.head_begin = f.hb;
    s.head_end = f.he;
    s.ldq = s.ldy = f.heads * f.dh + f.pad;
    s.ldk = s.ldv = f.kv * f.dh + f.pad;
    s.window = f.window;
    const std::int64_t T = f.batch * f.seq;
    auto q = rnd(static_cast<std::size_t>(T * s.ldq), 1, 2.f), k = rnd(static_cast<std::size_t>(T * s.ldk), 2, 2.f), v = rnd(static_cast<std::size_t>(T * s.ldv), 3);
    std::vector<float> y0(static_cast<std::size_t>(T * s.ldy), 77.f);
    Dev<float> dq(q), dk(k), dv(v), dy(y0);
    const float scale = 1.f / std::sqrt(float(f.dh));
    nc::attention_f32(dq.p, dk.p, dv.p, dy.p, s, f.causal, scale, nullptr);
    const auto want = attention_ref(q, k, v, s, f.causal, scale, std::vector<long double>(y0.begin(), y0.end()));
    SCOPED_TRACE("seq " + std::to_string(f.seq) + " dh " + std::to_string(f.dh) + " window " + std::to_string(f.window));
    expect_close(dy.host(), want, 1e-4);  // unwritten heads and padding keep 77
  }
}

TEST(CudaKernels, RopeMatchesLongDouble) {
  SKIP_WITHOUT_DEVICE();
  for (bool inter : {false, true}) {
    const std::int64_t rows = 10, heads = 3, dh = 12, rd = 8, seq = 5, off = 2, ld = heads * dh + 1;
    auto x = rnd(static_cast<std::size_t>(rows * ld), 4, 2.f);
    Dev<float> dx(x);
    nc::rope_f32(dx.p, rows, ld, heads, dh, rd, seq, off, 10000.0, inter, nullptr);
    std::vector<long double> want(x.begin(), x.end());
    for (std::int64_t r = 0; r < rows; ++r)
      for (std::int64_t h = 0; h < heads; ++h)
        for (std::int64_t i = 0; i < rd / 2; ++i) {
          const long double ang = (long double)(r % seq + off) * std::pow(10000.0L, -2.0L * i / rd);
          const std::size_t a = static_cast<std::size_t>(r * ld + h * dh + (inter ? 2 * i : i));
          const std::size_t b = static_cast<std::size_t>(r * ld + h * dh + (inter ? 2 * i + 1 : i + rd / 2));
          want[a] = x[a] * std::cos(ang) - x[b] * std::sin(ang);
          want[b] = x[b] * std::cos(ang) + x[a] * std::sin(ang);
        }
    expect_close(dx.host(), want, 1e-6);
  }
}

TEST(CudaKernels, EmbeddingGathersAndReportsTheFirstBadId) {
  SKIP_WITHOUT_DEVICE();
  const std::int64_t vocab = 11, d = 37, n = 6;
  auto table = rnd(static_cast<std::size_t>(vocab * d), 5);
  std::vector<std::int32_t> ids = {3, 0, 10, 3, 7, 1};
  Dev<float> dt(table), dy(std::vector<float>(static_cast<std::size_t>(n * d), 0.f));
  Dev<std::int32_t> di(ids);
  std::int64_t bad = 0;
  EXPECT_EQ(nc::embedding_f32(di.p, n, n, n, dt.p, vocab, d, d, dy.p, d, &bad, nullptr), -1);
  const auto y = dy.host();
  for (std::int64_t i = 0; i < n; ++i)
    for (std::int64_t c = 0; c < d; ++c)
      ASSERT_EQ(y[static_cast<std::size_t>(i * d + c)], table[static_cast<std::size_t>(ids[static_cast<std::size_t>(i)] * d + c)]) << i << "," << c;
  std::vector<std::int32_t> bad_ids = {1, 2, 11, -1, 12, 0};
  Dev<std::int32_t> db(bad_ids);
  EXPECT_EQ(nc::embedding_f32(db.p, n, 1, 1, dt.p, vocab, d, d, dy.p, d, &bad, nullptr), 2);  // [n, 1] ids
  EXPECT_EQ(bad, 11);
}

/// The CPU's per-token rule (quantize_row_generic in qlinear_prepare.cpp).
float quantize_ref(const float* x, std::int64_t k, std::int8_t* q) {
  float amax = 0;
  for (std::int64_t c = 0; c < k; ++c) amax = std::max(amax, std::fabs(x[c]));
  if (!(amax > 0) || !std::isfinite(amax)) {
    std::fill(q, q + k, std::int8_t(0));
    return 0;
  }
  const float inv = 127.0f / amax;
  for (std::int64_t c = 0; c < k; ++c) q[c] = std::int8_t(std::min(127.0f, std::max(-127.0f, std::nearbyint(x[c] * inv))));
  return amax / 127.0f;
}

TEST(CudaKernels, QuantizeAndInt8LinearAreExact) {
  SKIP_WITHOUT_DEVICE();
  const std::int64_t m = 9, k = 68, n = 20;
  auto x = rnd(static_cast<std::size_t>(m * k), 6, 3.f);
  for (std::int64_t c = 0; c < k; ++c) x[static_cast<std::size_t>(2 * k + c)] = 0.f;  // an all-zero token: a = 0
  auto w = rnd_i8(static_cast<std::size_t>(n * k), 7);
  std::vector<float> s(static_cast<std::size_t>(n));
  for (std::int64_t j = 0; j < n; ++j) s[static_cast<std::size_t>(j)] = 0.01f + 0.001f * float(j);
  Dev<float> dx(x), ds(s), dy(std::vector<float>(static_cast<std::size_t>(m * n))), da(std::vector<float>(static_cast<std::size_t>(m)));
  Dev<std::int8_t> dw(w), dq(std::vector<std::int8_t>(static_cast<std::size_t>(m * k)));
  qc::quantize_rows_i8(dx.p, m, k, k, dq.p, k, da.p, nullptr);
  qc::linear_i8(dx.p, m, k, k, dw.p, k, ds.p, n, dy.p, n, nullptr);
  std::vector<std::int8_t> q(static_cast<std::size_t>(m * k));
  std::vector<float> a(static_cast<std::size_t>(m)), y(static_cast<std::size_t>(m * n));
  for (std::int64_t i = 0; i < m; ++i) a[static_cast<std::size_t>(i)] = quantize_ref(&x[static_cast<std::size_t>(i * k)], k, &q[static_cast<std::size_t>(i * k)]);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      std::int64_t t = 0;  // exact
      for (std::int64_t c = 0; c < k; ++c) t += std::int64_t(q[static_cast<std::size_t>(i * k + c)]) * w[static_cast<std::size_t>(j * k + c)];
      y[static_cast<std::size_t>(i * n + j)] = a[static_cast<std::size_t>(i)] * (float(t) * s[static_cast<std::size_t>(j)]);
    }
  EXPECT_EQ(dq.host(), q);
  EXPECT_EQ(da.host(), a);
  EXPECT_EQ(dy.host(), y);  // the int32 sums are exact and the two f32 products the same
}

TEST(CudaKernels, Int8GemmIsExactInInt32) {
  SKIP_WITHOUT_DEVICE();
  const std::int64_t m = 5, n = 12, k = 132, ldx = 136, ldw = 132, ldt = 16;
  auto xq = rnd_i8(static_cast<std::size_t>(m * ldx), 8), w = rnd_i8(static_cast<std::size_t>(n * ldw), 9);
  Dev<std::int8_t> dx(xq), dw(w);
  Dev<std::int32_t> dt(std::vector<std::int32_t>(static_cast<std::size_t>(m * ldt), -7));
  qc::gemm_i8_i32(dx.p, ldx, dw.p, ldw, dt.p, ldt, m, n, k, nullptr);
  const auto t = dt.host();
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < ldt; ++j) {
      std::int64_t want = -7;  // columns >= n untouched
      if (j < n) {
        want = 0;
        for (std::int64_t c = 0; c < k; ++c) want += std::int64_t(xq[static_cast<std::size_t>(i * ldx + c)]) * w[static_cast<std::size_t>(j * ldw + c)];
      }
      ASSERT_EQ(t[static_cast<std::size_t>(i * ldt + j)], want) << i << "," << j;
    }
}

TEST(CudaKernels, DequantizeGroupIsExact) {
  SKIP_WITHOUT_DEVICE();
  for (int bits : {8, 4})
    for (bool asym : {false, true}) {
      const std::int64_t n = 5, k = 64, group = 32, G = k / group, qcols = bits == 8 ? k : k / 2;
      auto q = rnd_i8(static_cast<std::size_t>(n * qcols), 10);
      std::vector<float> s(static_cast<std::size_t>(n * G)), z(static_cast<std::size_t>(n * G));
      for (std::size_t i = 0; i < s.size(); ++i) {
        s[i] = 0.01f * float(i + 1);
        z[i] = bits == 4 ? float(i % 16) : float(int(i % 9) - 4);
      }
      Dev<std::int8_t> dq(q);
      Dev<float> ds(s), dz(z), dout(std::vector<float>(static_cast<std::size_t>(n * k)));
      qc::GroupWeight w;
      w.bits = bits;
      w.q = dq.p;
      w.q_ld = qcols;
      w.n = n;
      w.k = k;
      w.group = group;
      w.scale = ds.p;
      w.scale_ld = G;
      if (asym) {
        w.zero = dz.p;
        w.zero_ld = G;
      }
      qc::dequantize_group(w, dout.p, k, nullptr);
      std::vector<float> want(static_cast<std::size_t>(n * k));
      for (std::int64_t r = 0; r < n; ++r)
        for (std::int64_t c = 0; c < k; ++c) {
          const std::int64_t g = c / group;
          int code = q[static_cast<std::size_t>(r * qcols + (bits == 8 ? c : c / 2))];
          if (bits == 4) code = (c & 1) ? (std::uint8_t(code) >> 4) : (std::uint8_t(code) & 15);
          const float zz = asym ? z[static_cast<std::size_t>(r * G + g)] : (bits == 4 ? 8.f : 0.f);
          want[static_cast<std::size_t>(r * k + c)] = (float(code) - zz) * s[static_cast<std::size_t>(r * G + g)];
        }
      EXPECT_EQ(dout.host(), want) << "bits " << bits << " asym " << asym;
    }
}

TEST(CudaKernels, CsrLinearMatchesLongDouble) {
  SKIP_WITHOUT_DEVICE();
  const std::int64_t m = 7, n = 13, k = 29, ldx = 31, ldy = 15;
  std::mt19937 g(11);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> values;
  std::vector<std::int32_t> col, row_ptr = {0};
  std::vector<long double> dense(static_cast<std::size_t>(n * k), 0);
  for (std::int64_t r = 0; r < n; ++r) {
    for (std::int64_t c = 0; c < k; ++c)
      if ((r * 7 + c * 3) % 5 == 0 && r != 4) {  // row 4 empty
        values.push_back(u(g));
        col.push_back(std::int32_t(c));
        dense[static_cast<std::size_t>(r * k + c)] = values.back();
      }
    row_ptr.push_back(std::int32_t(values.size()));
  }
  auto x = rnd(static_cast<std::size_t>(m * ldx), 12);
  Dev<float> dv(values), dx(x), dy(std::vector<float>(static_cast<std::size_t>(m * ldy), 77.f));
  Dev<std::int32_t> dc(col), dr(row_ptr);
  sc::csr_linear_f32(dv.p, dc.p, dr.p, n, k, std::int64_t(values.size()), dx.p, m, ldx, dy.p, ldy, nullptr);
  std::vector<long double> want(static_cast<std::size_t>(m * ldy), 77.f);
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      long double acc = 0;
      for (std::int64_t c = 0; c < k; ++c) acc += dense[static_cast<std::size_t>(j * k + c)] * x[static_cast<std::size_t>(i * ldx + c)];
      want[static_cast<std::size_t>(i * ldy + j)] = acc;
    }
  expect_close(dy.host(), want, 1e-5);
}
#else
TEST(CudaKernels, BuiltWithoutCuda) { GTEST_SKIP() << "built without CUDA kernels: no nvcc found (cmake/cuda.cmake)"; }
#endif

}  // namespace
