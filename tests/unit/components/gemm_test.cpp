// ymlopt::gemm::gemm (the GEMM inside CPU kernels: oneDNN sgemm when built with
// it, OpenBLAS otherwise) against naive long-double references and BLAS edge
// semantics.
#include "gemm/gemm.hpp"
#include "gemm/sgemm_panels.hpp"

#include <bit>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

#include "test_context.hpp"

namespace ymlopt::test {
namespace {

template <class T> class GemmTyped : public ::testing::Test {};
using FloatTypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GemmTyped, FloatTypes);

template <class T>
void call(bool ta, bool tb, Mat<T>& a, Mat<T>& b, Mat<T>& c, T alpha, T beta,
          gemm::Library lib = gemm::Library::best) {
  gemm::gemm(ta, tb, c.rows, c.cols, ta ? a.rows : a.cols, alpha, a.buf.data(), a.ld, b.buf.data(), b.ld, beta,
             c.buf.data(), c.ld, lib);
}

// Shapes past the libraries' register and cache blocks (odd sizes, strided),
// every transpose combination, both libraries.
TYPED_TEST(GemmTyped, MatchesNaiveOnBlockedShapes) {
  using T = TypeParam;
  struct Case {
    std::int64_t m, n, k;
  };
  std::uint32_t seed = 7;
  for (gemm::Library lib : {gemm::Library::best, gemm::Library::openblas})
  // m = 1, n = 1 and both: the matrix-vector path (strided vectors when transposed)
  for (Case cs : {Case{131, 97, 257}, Case{64, 300, 33}, Case{1, 513, 129}, Case{517, 3, 64}, Case{300, 1, 77},
                  Case{1, 1, 50}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        Mat<T> a(ta ? cs.k : cs.m, ta ? cs.m : cs.k, 5), b(tb ? cs.n : cs.k, tb ? cs.k : cs.n, 16),
            c(cs.m, cs.n, 2);
        a.random(seed++);
        b.random(seed++);
        c.random(seed++);
        const auto ref = naive_gemm(a, b, c, ta, tb, -0.75L, 2.0L);
        call(ta, tb, a, b, c, T(-0.75), T(2), lib);
        SCOPED_TRACE(::testing::Message() << cs.m << "x" << cs.n << "x" << cs.k << " ta=" << ta << " tb=" << tb
                                          << " lib=" << (lib == gemm::Library::best ? "best" : "openblas"));
        EXPECT_LT(max_rel_err(c, ref), 40 * eps<T>());
        for (std::int64_t i = 0; i < c.rows; ++i)
          for (std::int64_t j = c.cols; j < c.ld; ++j) ASSERT_EQ(c(i, j), T(77)) << "padding written";
      }
}

// BLAS semantics: beta == 0 never reads C (NaN there must not propagate).
TYPED_TEST(GemmTyped, BetaZeroIgnoresNaNInC) {
  using T = TypeParam;
  Mat<T> a(40, 70), b(70, 50), c(40, 50);
  a.random(1);
  b.random(2);
  for (auto& v : c.buf) v = std::numeric_limits<T>::quiet_NaN();
  const Mat<T> zero = [&] {
    Mat<T> z(40, 50);
    for (auto& v : z.buf) v = 0;
    return z;
  }();
  const auto ref = naive_gemm(a, b, zero, false, false, 1, 0);
  call(false, false, a, b, c, T(1), T(0));
  EXPECT_LT(max_rel_err(c, ref), 20 * eps<T>());
}

// The same for one row or one column of C (the matrix-vector path), every transpose.
TYPED_TEST(GemmTyped, BetaZeroIgnoresNaNInAVectorC) {
  using T = TypeParam;
  for (auto [m, n] : {std::pair<std::int64_t, std::int64_t>{1, 37}, {29, 1}})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        const std::int64_t k = 45;
        Mat<T> a(ta ? k : m, ta ? m : k, 3), b(tb ? n : k, tb ? k : n, 2), c(m, n, 1), zero(m, n, 1);
        a.random(3);
        b.random(4);
        for (auto& v : c.buf) v = std::numeric_limits<T>::quiet_NaN();
        for (auto& v : zero.buf) v = 0;
        const auto ref = naive_gemm(a, b, zero, ta, tb, 1, 0);
        call(ta, tb, a, b, c, T(1), T(0));
        SCOPED_TRACE(::testing::Message() << m << "x" << n << " ta=" << ta << " tb=" << tb);
        EXPECT_LT(max_rel_err(c, ref), 20 * eps<T>());
      }
}

// k == 0: C = beta C; m or n == 0: nothing to do (no call into the library).
TYPED_TEST(GemmTyped, EmptyInnerDimensionScalesC) {
  using T = TypeParam;
  Mat<T> a(6, 0), b(0, 5), c(6, 5);
  c.random(3);
  const Mat<T> before = c;
  call(false, false, a, b, c, T(1), T(0.5));
  for (std::int64_t i = 0; i < 6; ++i)
    for (std::int64_t j = 0; j < 5; ++j) EXPECT_EQ(c(i, j), T(0.5) * before(i, j));
  Mat<T> e(0, 5);
  gemm::gemm(false, false, 0, 5, 3, T(1), a.buf.data(), 3, b.buf.data(), 5, T(0), e.buf.data(), 5);
}

// Two threads calling at once (as two StarPU workers do) get the bits one
// thread gets: the call is single-threaded and deterministic.
TEST(Gemm, ConcurrentCallsAreBitIdenticalToSerial) {
  Mat<float> a(384, 256), b(256, 320);
  a.random(4);
  b.random(5);
  Mat<float> serial(384, 320), c0(384, 320), c1(384, 320);
  call(false, false, a, b, serial, 1.0f, 0.0f);
  std::thread t([&] { call(false, false, a, b, c1, 1.0f, 0.0f); });
  call(false, false, a, b, c0, 1.0f, 0.0f);
  t.join();
  EXPECT_EQ(c0.buf, serial.buf);
  EXPECT_EQ(c1.buf, serial.buf);
}

// f64 with operand ids (packed_dgemm.cpp): OpenBLAS's kernel on panels kept per
// id. Shapes cross the loop's blocks (192 rows, 384 of k, 2048 columns of the
// col-major problem, i.e. rows m here); the second call of each case finds its
// panels in the cache and must give the same bits.
bool packed_reuse() {
  return gemm::dgemm_library().find("packed panels of unchanged tiles reused") != std::string::npos;
}

TEST(PackedDgemm, MatchesNaiveFromCachedPanels) {
  if (!packed_reuse()) GTEST_SKIP() << gemm::dgemm_library();
  struct Case {
    std::int64_t m, n, k;
  };
  std::uint32_t seed = 11;
  std::uint64_t id = (std::uint64_t(0xfff00000) << 32) + 1;  // an epoch no run of this process reaches
  for (Case cs : {Case{131, 97, 257}, Case{300, 200, 400}, Case{2100, 70, 70}, Case{64, 64, 64}})
    for (int which = 1; which <= 3; ++which)  // ids for a, b, both
      for (bool ta : {false, true})
        for (bool tb : {false, true}) {
          Mat<double> a(ta ? cs.k : cs.m, ta ? cs.m : cs.k, 5), b(tb ? cs.n : cs.k, tb ? cs.k : cs.n, 16),
              c(cs.m, cs.n, 2);
          a.random(seed++);
          b.random(seed++);
          c.random(seed++);
          const Mat<double> c0 = c;
          const auto ref = naive_gemm(a, b, c, ta, tb, -0.75L, 2.0L);
          const gemm::OperandIds ids{which & 1 ? id++ : 0, which & 2 ? id++ : 0};
          SCOPED_TRACE(::testing::Message()
                       << cs.m << "x" << cs.n << "x" << cs.k << " ta=" << ta << " tb=" << tb << " ids=" << which);
          auto run = [&](Mat<double>& out) {
            gemm::gemm(ta, tb, cs.m, cs.n, cs.k, -0.75, a.buf.data(), a.ld, b.buf.data(), b.ld, 2.0, out.buf.data(),
                       out.ld, ids);
          };
          const gemm::PackCacheStats s0 = gemm::pack_cache_stats();
          run(c);
          const gemm::PackCacheStats s1 = gemm::pack_cache_stats();
          EXPECT_EQ(s1.misses - s0.misses, std::popcount(unsigned(which))) << "one packing per named operand";
          EXPECT_LT(max_rel_err(c, ref), 40 * eps<double>());
          for (std::int64_t i = 0; i < c.rows; ++i)
            for (std::int64_t j = c.cols; j < c.ld; ++j) ASSERT_EQ(c(i, j), 77.0) << "padding written";
          Mat<double> again = c0;
          run(again);
          const gemm::PackCacheStats s2 = gemm::pack_cache_stats();
          EXPECT_EQ(s2.hits - s1.hits, std::popcount(unsigned(which))) << "the panels are reused";
          EXPECT_EQ(again.buf, c.buf);
        }
}

// The cache answers by id, not by address: two contents under two ids at the
// same address each get their own product; beta == 0 ignores NaN in C.
TEST(PackedDgemm, KeysOnTheIdNotTheAddress) {
  if (!packed_reuse()) GTEST_SKIP() << gemm::dgemm_library();
  Mat<double> a(96, 80), b(80, 72), c(96, 72);
  const std::uint64_t epoch = std::uint64_t(0xfff10000) << 32;
  for (int version = 1; version <= 2; ++version) {
    a.random(std::uint32_t(100 + version));
    b.random(std::uint32_t(200 + version));
    for (auto& v : c.buf) v = std::numeric_limits<double>::quiet_NaN();
    Mat<double> zero(96, 72);
    for (auto& v : zero.buf) v = 0;
    const auto ref = naive_gemm(a, b, zero, false, false, 1.0L, 0.0L);
    gemm::gemm(false, false, 96, 72, 80, 1.0, a.buf.data(), a.ld, b.buf.data(), b.ld, 0.0, c.buf.data(), c.ld,
               gemm::OperandIds{epoch + std::uint64_t(2 * version), epoch + std::uint64_t(2 * version + 1)});
    EXPECT_LT(max_rel_err(c, ref), 20 * eps<double>()) << "version " << version;
  }
}

// A newer run's ids (epoch in the high 32 bits) drop the panels of older runs.
TEST(PackedDgemm, NewerRunDropsOlderPanels) {
  if (!packed_reuse()) GTEST_SKIP() << gemm::dgemm_library();
  Mat<double> a(128, 128), b(128, 128), c(128, 128);
  a.random(1), b.random(2);
  auto call_with = [&](std::uint64_t epoch) {
    gemm::gemm(false, false, 128, 128, 128, 1.0, a.buf.data(), a.ld, b.buf.data(), b.ld, 0.0, c.buf.data(), c.ld,
               gemm::OperandIds{epoch << 32 | 1, epoch << 32 | 2});
  };
  call_with(0xfff20000);
  const std::int64_t one_call = gemm::pack_cache_stats().bytes;
  EXPECT_GT(one_call, 2 * 128 * 128 * 8 - 1);
  call_with(0xfff20001);
  EXPECT_EQ(gemm::pack_cache_stats().bytes, one_call) << "the older run's panels are gone";
}

// f32 with panels (sgemm_panels.hpp): every path this CPU has against a
// long-double reference and against the scalar path, on shapes across the
// tiles (12 / 6 / 4 rows, 32 columns, k blocks of 512), both layouts of B,
// op(A) transposed, alpha and beta (beta == 0 ignores NaN in C), and the
// padding of C untouched.
std::vector<gemm::SgemmIsa> panel_isas() {
  std::vector<gemm::SgemmIsa> v{gemm::SgemmIsa::scalar};
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) v.push_back(gemm::SgemmIsa::avx2);
  if (__builtin_cpu_supports("avx512f")) v.push_back(gemm::SgemmIsa::avx512);
  return v;
}

TEST(SgemmPanels, EveryPathMatchesTheReference) {
  struct Case {
    std::int64_t m, n, k;
  };
  std::uint32_t seed = 21;
  for (Case cs : {Case{1, 1, 1}, Case{13, 33, 7}, Case{12, 32, 512}, Case{25, 70, 513}, Case{128, 96, 1030},
                  Case{7, 31, 64}})
    for (bool ta : {false, true})
      for (bool tb : {false, true})
        for (int betas = 0; betas < 3; ++betas) {
          const float alpha = betas == 2 ? -0.5f : 1.0f, beta = betas == 0 ? 0.0f : betas == 1 ? 1.0f : 0.25f;
          Mat<float> a(ta ? cs.k : cs.m, ta ? cs.m : cs.k, 3), b(tb ? cs.n : cs.k, tb ? cs.k : cs.n, 5),
              c0(cs.m, cs.n, 2);
          a.random(seed++);
          b.random(seed++);
          c0.random(seed++);
          if (beta == 0.0f)
            for (std::int64_t i = 0; i < c0.rows; ++i)
              for (std::int64_t j = 0; j < c0.cols; ++j) c0(i, j) = std::numeric_limits<float>::quiet_NaN();
          Mat<float> zero = c0;
          if (beta == 0.0f)
            for (std::int64_t i = 0; i < zero.rows; ++i)
              for (std::int64_t j = 0; j < zero.cols; ++j) zero(i, j) = 0;
          const auto ref = naive_gemm(a, b, zero, ta, tb, (long double)alpha, (long double)beta);
          std::vector<float> panels(std::size_t(gemm::panel_floats(cs.n, cs.k)), 99.0f);
          gemm::pack_panels(b.buf.data(), tb, cs.n, cs.k, b.ld, panels.data());
          std::vector<float> scalar_out;
          for (gemm::SgemmIsa isa : panel_isas()) {
            SCOPED_TRACE(::testing::Message() << cs.m << "x" << cs.n << "x" << cs.k << " ta=" << ta << " tb=" << tb
                                              << " beta=" << beta << " isa=" << int(isa));
            Mat<float> c = c0;
            gemm::sgemm_panels(ta, cs.m, cs.n, cs.k, alpha, a.buf.data(), a.ld, panels.data(), beta, c.buf.data(),
                               c.ld, isa);
            EXPECT_LT(max_rel_err(c, ref), 40 * eps<float>());
            for (std::int64_t i = 0; i < c.rows; ++i)
              for (std::int64_t j = c.cols; j < c.ld; ++j) ASSERT_EQ(c(i, j), 77.0f) << "padding written";
            if (isa == gemm::SgemmIsa::scalar) {
              scalar_out = c.buf;
            } else {  // the vector paths sum in another order: within the f32 bound of the scalar one
              Mat<float> s = c;
              s.buf = scalar_out;
              double worst = 0;
              for (std::int64_t i = 0; i < c.rows; ++i)
                for (std::int64_t j = 0; j < c.cols; ++j) worst = std::max(worst, double(std::fabs(c(i, j) - s(i, j))));
              EXPECT_LT(worst, 1e-4 * std::sqrt(double(cs.k))) << "against the scalar path";
            }
          }
        }
}

// Panels hold zeros past n, and a product with k == 0 or alpha == 0 only scales C.
TEST(SgemmPanels, PacksZerosPastNAndScalesOnlyWithoutWork) {
  Mat<float> b(3, 5);  // [n = 3, k = 5], packed as op(B) = Bᵀ
  b.random(4);
  std::vector<float> p(std::size_t(gemm::panel_floats(3, 5)), 1.0f);
  ASSERT_EQ(p.size(), 32u * 5u);
  gemm::pack_panels(b.buf.data(), true, 3, 5, b.ld, p.data());
  for (std::int64_t q = 0; q < 5; ++q)
    for (std::int64_t j = 0; j < 32; ++j)
      EXPECT_EQ(p[std::size_t(q * 32 + j)], j < 3 ? b(j, q) : 0.0f) << q << "," << j;
  Mat<float> a(2, 5), c(2, 3);
  a.random(5);
  for (auto& v : c.buf) v = 2.0f;
  gemm::sgemm_panels(false, 2, 3, 0, 1.0f, a.buf.data(), a.ld, p.data(), 0.5f, c.buf.data(), c.ld);
  EXPECT_EQ(c(1, 2), 1.0f);
  gemm::sgemm_panels(false, 2, 3, 5, 0.0f, a.buf.data(), a.ld, p.data(), 0.0f, c.buf.data(), c.ld);
  EXPECT_EQ(c(0, 0), 0.0f);
}

// gemm() with ids.b: the first use of an operand in a run runs unpacked, the
// second packs it, the third finds it; every call gives the reference product.
TEST(SgemmPanels, KeptPerIdFromTheSecondUse) {
  if (!gemm::keeps_sgemm_panels(64, 96, 80)) GTEST_SKIP() << gemm::sgemm_panels_description();
  Mat<float> a(64, 80), b(96, 80), c(64, 96), zero(64, 96);
  a.random(1), b.random(2);
  for (auto& v : zero.buf) v = 0;
  const auto ref = naive_gemm(a, b, zero, false, true, 1.0L, 0.0L);
  const std::uint64_t id = std::uint64_t(0xfff30000) << 32 | 7;
  const gemm::PackCacheStats s0 = gemm::sgemm_pack_cache_stats();
  for (int use = 0; use < 3; ++use) {
    for (auto& v : c.buf) v = std::numeric_limits<float>::quiet_NaN();
    gemm::gemm(false, true, 64, 96, 80, 1.0f, a.buf.data(), a.ld, b.buf.data(), b.ld, 0.0f, c.buf.data(), c.ld,
               gemm::OperandIds{0, id});
    EXPECT_LT(max_rel_err(c, ref), 40 * eps<float>()) << "use " << use;
  }
  const gemm::PackCacheStats s1 = gemm::sgemm_pack_cache_stats();
  EXPECT_EQ(s1.deferred - s0.deferred, 1);
  EXPECT_EQ(s1.misses - s0.misses, 1);
  EXPECT_EQ(s1.hits - s0.hits, 1);
  EXPECT_NE(gemm::sgemm_panels_description().find("panels"), std::string::npos);
}

TEST(Gemm, NamesItsLibrary) {
  const std::string lib = gemm::sgemm_library();
  EXPECT_TRUE(lib.rfind("oneDNN ", 0) == 0 || lib == "OpenBLAS sgemm") << lib;
  EXPECT_NE(lib.find("sgemm"), std::string::npos);
  EXPECT_EQ(gemm::dgemm_library().rfind("OpenBLAS dgemm", 0), 0u) << gemm::dgemm_library();
}

}  // namespace
}  // namespace ymlopt::test
