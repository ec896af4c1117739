// The nn family's CUDA kernels (components/nn/nn_cuda.cu) against long-double
// CPU references on the same inputs. Without nvcc at build time, or without a
// usable GPU at run time, every test skips and says why.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#if YMLOPT_HAVE_CUDA
#include <cuda_runtime.h>

#include "nn/nn_cuda.hpp"
#endif

namespace {

#if YMLOPT_HAVE_CUDA
namespace cu = ymlopt::nn::cuda;

#define SKIP_WITHOUT_DEVICE()                          \
  do {                                                 \
    std::string why;                                   \
    if (!cu::device_available(&why)) GTEST_SKIP() << why; \
  } while (0)

// A device copy of a host vector, copied back with host().
struct DeviceVec {
  float* p = nullptr;
  size_t n = 0;
  explicit DeviceVec(const std::vector<float>& h) : n(h.size()) {
    EXPECT_EQ(cudaMalloc(&p, n * sizeof(float)), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(p, h.data(), n * sizeof(float), cudaMemcpyHostToDevice), cudaSuccess);
  }
  DeviceVec(const DeviceVec&) = delete;
  ~DeviceVec() { cudaFree(p); }
  std::vector<float> host() const {
    std::vector<float> h(n);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    EXPECT_EQ(cudaMemcpy(h.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
    return h;
  }
};

std::vector<float> random_vec(size_t n, unsigned seed, float scale = 3.f) {
  std::mt19937 g(seed);
  std::uniform_real_distribution<float> u(-scale, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = u(g);
  return v;
}

void expect_close(const std::vector<float>& got, const std::vector<long double>& want, double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(double(got[i]), double(want[i]), tol * (1.0 + std::fabs(double(want[i])))) << "element " << i;
}

// widths that exercise one partial warp, several warps and several passes of a block
const std::int64_t kCols[] = {7, 96, 768, 3000};

TEST(NnCuda, SoftmaxRowsMatchesLongDouble) {
  SKIP_WITHOUT_DEVICE();
  for (std::int64_t cols : kCols) {
    const std::int64_t rows = 5;
    auto x = random_vec(size_t(rows * cols), 1, 20.f);
    DeviceVec dx(x), dy{std::vector<float>(x.size())};
    cu::softmax_rows(dx.p, dy.p, rows, cols, nullptr);
    std::vector<long double> want(x.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      long double m = -INFINITY, s = 0;
      for (std::int64_t j = 0; j < cols; ++j) m = std::max<long double>(m, x[size_t(r * cols + j)]);
      for (std::int64_t j = 0; j < cols; ++j) s += std::exp((long double)x[size_t(r * cols + j)] - m);
      for (std::int64_t j = 0; j < cols; ++j) want[size_t(r * cols + j)] = std::exp((long double)x[size_t(r * cols + j)] - m) / s;
    }
    expect_close(dy.host(), want, 1e-5);
  }
}

TEST(NnCuda, LayerNormAndRmsNormMatchLongDouble) {
  SKIP_WITHOUT_DEVICE();
  for (std::int64_t cols : kCols) {
    const std::int64_t rows = 4;
    auto x = random_vec(size_t(rows * cols), 2);
    for (auto& v : x) v += 5.f;  // a large mean: the two-pass variance must not cancel
    auto gamma = random_vec(size_t(cols), 3), beta = random_vec(size_t(cols), 4);
    DeviceVec dx(x), dg(gamma), db(beta), dy{std::vector<float>(x.size())}, dr{std::vector<float>(x.size())};
    cu::layernorm_rows(dx.p, dg.p, db.p, dy.p, rows, cols, 1e-5f, nullptr);
    cu::rmsnorm_rows(dx.p, dg.p, dr.p, rows, cols, 1e-6f, nullptr);
    std::vector<long double> ln(x.size()), rms(x.size());
    for (std::int64_t r = 0; r < rows; ++r) {
      long double mean = 0, var = 0, sq = 0;
      for (std::int64_t j = 0; j < cols; ++j) mean += x[size_t(r * cols + j)];
      mean /= cols;
      for (std::int64_t j = 0; j < cols; ++j) {
        const long double d = x[size_t(r * cols + j)] - mean;
        var += d * d;
        sq += (long double)x[size_t(r * cols + j)] * x[size_t(r * cols + j)];
      }
      var /= cols;
      const long double rstd = 1 / std::sqrt(var + 1e-5L), rr = 1 / std::sqrt(sq / cols + 1e-6L);
      for (std::int64_t j = 0; j < cols; ++j) {
        const size_t i = size_t(r * cols + j);
        ln[i] = (x[i] - mean) * rstd * gamma[size_t(j)] + beta[size_t(j)];
        rms[i] = x[i] * rr * gamma[size_t(j)];
      }
    }
    expect_close(dy.host(), ln, 2e-5);
    expect_close(dr.host(), rms, 2e-5);
  }
}

TEST(NnCuda, GeluAndSiluMatchLongDouble) {
  SKIP_WITHOUT_DEVICE();
  const size_t n = 100003;  // more than one grid-stride pass is not needed; a ragged tail is
  auto x = random_vec(n, 5, 8.f);
  DeviceVec dx(x), de{std::vector<float>(n)}, dt{std::vector<float>(n)}, ds{std::vector<float>(n)};
  cu::gelu(dx.p, de.p, std::int64_t(n), false, nullptr);
  cu::gelu(dx.p, dt.p, std::int64_t(n), true, nullptr);
  cu::silu(dx.p, ds.p, std::int64_t(n), nullptr);
  std::vector<long double> e(n), t(n), s(n);
  for (size_t i = 0; i < n; ++i) {
    const long double v = x[i];
    e[i] = 0.5L * v * (1 + std::erf(v / std::sqrt(2.0L)));
    t[i] = 0.5L * v * (1 + std::tanh(std::sqrt(2.0L / 3.14159265358979323846L) * (v + 0.044715L * v * v * v)));
    s[i] = v / (1 + std::exp(-v));
  }
  expect_close(de.host(), e, 1e-5);
  expect_close(dt.host(), t, 1e-5);
  expect_close(ds.host(), s, 1e-5);
}

TEST(NnCuda, GemmMatchesLongDoubleWithStridesAndBeta) {
  SKIP_WITHOUT_DEVICE();
  const std::int64_t m = 67, n = 45, k = 130, lda = k + 3, ldb = n + 5, ldc = n + 1;
  auto a = random_vec(size_t(m * lda), 6, 1.f), b = random_vec(size_t(k * ldb), 7, 1.f), c = random_vec(size_t(m * ldc), 8, 1.f);
  DeviceVec da(a), db(b), dc(c);
  cu::gemm_f32(da.p, lda, db.p, ldb, dc.p, ldc, m, n, k, 1.5f, 0.5f, nullptr);
  std::vector<long double> want(c.begin(), c.end());
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      long double acc = 0;
      for (std::int64_t p = 0; p < k; ++p) acc += (long double)a[size_t(i * lda + p)] * b[size_t(p * ldb + j)];
      want[size_t(i * ldc + j)] = 1.5L * acc + 0.5L * c[size_t(i * ldc + j)];
    }
  // cuBLAS may use TF32 only when asked: the default math mode is full f32
  expect_close(dc.host(), want, 1e-4);
}

TEST(NnCuda, BadSizesThrowBeforeAnyLaunch) {
  // argument checks run on the host: testable without a device
  EXPECT_THROW(cu::softmax_rows(nullptr, nullptr, 2, 0, nullptr), std::invalid_argument);
  EXPECT_THROW(cu::layernorm_rows(nullptr, nullptr, nullptr, nullptr, -1, 4, 1e-5f, nullptr), std::invalid_argument);
  try {
    cu::gemm_f32(nullptr, 2, nullptr, 3, nullptr, 3, 4, 3, 5, 1.f, 0.f, nullptr);
    FAIL() << "lda < k was accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), "gemm_f32: bad sizes m=4 n=3 k=5 lda=2 ldb=3 ldc=3");
  }
  // op(A) = A^T is [k, m]: lda >= m; op(B) = B^T is [n, k]: ldb >= k
  EXPECT_THROW(cu::gemm_f32_op(true, false, nullptr, 3, nullptr, 3, nullptr, 3, 4, 3, 5, 1.f, 0.f, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cu::gemm_f32_op(false, true, nullptr, 5, nullptr, 4, nullptr, 3, 4, 3, 5, 1.f, 0.f, nullptr),
               std::invalid_argument);
  EXPECT_THROW(cu::gemm_f32_op(false, false, nullptr, 5, nullptr, 3, nullptr, 3, -1, 3, 5, 1.f, 0.f, nullptr),
               std::invalid_argument);
}

TEST(NnCuda, GemmTransposesMatchLongDouble) {
  SKIP_WITHOUT_DEVICE();
  const std::int64_t m = 33, n = 17, k = 71;
  for (int ta = 0; ta < 2; ++ta)
    for (int tb = 0; tb < 2; ++tb) {
      const std::int64_t lda = (ta ? m : k) + 2, ldb = (tb ? k : n) + 1, ldc = n;
      auto a = random_vec(size_t((ta ? k : m) * lda), 9, 1.f), b = random_vec(size_t((tb ? n : k) * ldb), 10, 1.f);
      DeviceVec da(a), db(b), dc{std::vector<float>(size_t(m * ldc))};
      cu::gemm_f32_op(ta, tb, da.p, lda, db.p, ldb, dc.p, ldc, m, n, k, 1.f, 0.f, nullptr);
      std::vector<long double> want(size_t(m * ldc));
      for (std::int64_t i = 0; i < m; ++i)
        for (std::int64_t j = 0; j < n; ++j) {
          long double acc = 0;
          for (std::int64_t p = 0; p < k; ++p)
            acc += (long double)a[size_t(ta ? p * lda + i : i * lda + p)] * b[size_t(tb ? j * ldb + p : p * ldb + j)];
          want[size_t(i * ldc + j)] = acc;
        }
      expect_close(dc.host(), want, 1e-4);
    }
}

TEST(NnCuda, NormsWithoutGammaOrBeta) {
  SKIP_WITHOUT_DEVICE();
  const std::int64_t rows = 3, cols = 257;
  auto x = random_vec(size_t(rows * cols), 11);
  DeviceVec dx(x), dy{std::vector<float>(x.size())}, dr{std::vector<float>(x.size())};
  cu::layernorm_rows(dx.p, nullptr, nullptr, dy.p, rows, cols, 1e-5f, nullptr);
  cu::rmsnorm_rows(dx.p, nullptr, dr.p, rows, cols, 1e-6f, nullptr);
  std::vector<long double> ln(x.size()), rms(x.size());
  for (std::int64_t r = 0; r < rows; ++r) {
    long double mean = 0, var = 0, sq = 0;
    for (std::int64_t j = 0; j < cols; ++j) mean += x[size_t(r * cols + j)];
    mean /= cols;
    for (std::int64_t j = 0; j < cols; ++j) {
      const long double d = x[size_t(r * cols + j)] - mean;
      var += d * d;
      sq += (long double)x[size_t(r * cols + j)] * x[size_t(r * cols + j)];
    }
    for (std::int64_t j = 0; j < cols; ++j) {
      const size_t i = size_t(r * cols + j);
      ln[i] = (x[i] - mean) / std::sqrt(var / cols + 1e-5L);
      rms[i] = x[i] / std::sqrt(sq / cols + 1e-6L);
    }
  }
  expect_close(dy.host(), ln, 2e-5);
  expect_close(dr.host(), rms, 2e-5);
}

TEST(NnCuda, NoDeviceIsReportedNotFatal) {
  std::string why;
  if (cu::device_available(&why)) GTEST_SKIP() << "a CUDA device is present";
  EXPECT_EQ(why.rfind("no CUDA device: ", 0), 0u) << why;
}
#else
TEST(NnCuda, BuiltWithoutCuda) { GTEST_SKIP() << "built without CUDA kernels: no nvcc found (cmake/cuda.cmake)"; }
#endif

}  // namespace
