// prune.lowrank and the singular-value API against an independent LAPACK
// dgesvd (QR-iteration SVD; the component uses divide-and-conquer dgesdd):
// Eckart–Young error, exactness at the true rank, energy-based rank.
#include <gtest/gtest.h>
#include <lapacke.h>

#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "prune/prune_api.hpp"
#include "prune_test_util.hpp"

namespace ymlopt::test {
namespace {

/// Singular values by LAPACKE_dgesvd (values only), descending.
std::vector<double> ref_sigma(const Mat<double>& w) {
  std::vector<double> a(static_cast<std::size_t>(w.rows * w.cols));
  for (std::int64_t r = 0; r < w.rows; ++r)
    for (std::int64_t c = 0; c < w.cols; ++c) a[r * w.cols + c] = w(r, c);
  const std::int64_t mn = std::min(w.rows, w.cols);
  std::vector<double> s(static_cast<std::size_t>(mn)), superb(static_cast<std::size_t>(mn)), u(1), vt(1);
  const int info = LAPACKE_dgesvd(LAPACK_ROW_MAJOR, 'N', 'N', int(w.rows), int(w.cols), a.data(), int(w.cols),
                                  s.data(), u.data(), 1, vt.data(), 1, superb.data());
  EXPECT_EQ(info, 0);
  return s;
}

/// ||W - A B||_F in long double.
template <class T> double factor_error(const Mat<T>& w, const Mat<T>& a, const Mat<T>& b) {
  long double s = 0;
  for (std::int64_t i = 0; i < w.rows; ++i)
    for (std::int64_t j = 0; j < w.cols; ++j) {
      long double v = w(i, j);
      for (std::int64_t p = 0; p < a.cols; ++p) v -= static_cast<long double>(a(i, p)) * b(p, j);
      s += v * v;
    }
  return static_cast<double>(std::sqrt(s));
}

double tail(const std::vector<double>& s, std::size_t r) {
  long double t = 0;
  for (std::size_t i = r; i < s.size(); ++i) t += static_cast<long double>(s[i]) * s[i];
  return static_cast<double>(std::sqrt(t));
}

TEST(PruneLowrank, EckartYoungErrorAgainstDgesvd) {
  Mat<double> w = normal<double>(40, 30, 7, 3);
  const std::vector<double> s = ref_sigma(w);
  for (const char* split : {"left", "balanced"})
    for (std::int64_t r : {1, 5, 17, 30}) {
      Mat<double> a(40, r, 1), b(r, 30, 2);
      const auto rep = run(prune_registry(), "prune.lowrank", {w.view(), a.view(), b.view()},
                           {{"rank", std::to_string(r)}, {"split", split}});
      const double err = factor_error(w, a, b), want = tail(s, std::size_t(r));
      EXPECT_NEAR(err, want, 1e-10 * (1 + s[0])) << split << " rank " << r;
      EXPECT_NEAR(rep.at("error_fro"), want, 1e-10 * (1 + s[0]));
      EXPECT_EQ(a(0, r), 77.0);  // padding untouched
      if (std::string(split) == "balanced")
        for (std::int64_t p = 0; p < r; ++p) {  // ||a[:,p]|| = ||b[p,:]|| = sqrt(sigma_p)
          long double na = 0, nb = 0;
          for (std::int64_t i = 0; i < 40; ++i) na += a(i, p) * a(i, p);
          for (std::int64_t j = 0; j < 30; ++j) nb += b(p, j) * b(p, j);
          EXPECT_NEAR(double(std::sqrt(na)), std::sqrt(s[p]), 1e-10);
          EXPECT_NEAR(double(std::sqrt(nb)), std::sqrt(s[p]), 1e-10);
        }
    }
}

TEST(PruneLowrank, ExactAtAndAboveTheTrueRank) {
  // W = P Q of rank 6, stored in f32.
  const Mat<double> p = normal<double>(24, 6, 1), q = normal<double>(6, 36, 2);
  Mat<float> w(24, 36);
  for (std::int64_t i = 0; i < 24; ++i)
    for (std::int64_t j = 0; j < 36; ++j) {
      long double v = 0;
      for (std::int64_t t = 0; t < 6; ++t) v += static_cast<long double>(p(i, t)) * q(t, j);
      w(i, j) = float(v);
    }
  long double nw = 0;
  for (float v : w.buf) nw += static_cast<long double>(v) * v;
  for (std::int64_t r : {6, 9}) {
    Mat<float> a(24, r), b(r, 36);
    run(prune_registry(), "prune.lowrank", {w.view(), a.view(), b.view()}, {{"rank", std::to_string(r)}});
    EXPECT_LT(factor_error(w, a, b), 1e-5 * double(std::sqrt(nw))) << "rank " << r;
  }
  EXPECT_EQ(prune::rank_for_energy(w.buf.data(), 24, 36, 36, 1.0), 6);
}

TEST(PruneLowrank, SingularValuesAndRankForEnergy) {
  Mat<double> w = normal<double>(20, 50, 9, 2);
  const std::vector<double> ref = ref_sigma(w);
  const std::vector<double> s = prune::singular_values(w.buf.data(), 20, 50, w.ld);
  ASSERT_EQ(s.size(), ref.size());
  for (std::size_t i = 0; i < s.size(); ++i) EXPECT_NEAR(s[i], ref[i], 1e-11 * ref[0]);
  long double total = 0;
  for (double v : ref) total += static_cast<long double>(v) * v;
  for (double e : {0.1, 0.5, 0.9, 0.99}) {
    // Independent count: smallest r with the head's energy >= e.
    std::int64_t want = 0;
    long double acc = 0;
    while (acc < e * total) acc += static_cast<long double>(ref[want]) * ref[want], ++want;
    EXPECT_EQ(prune::rank_for_energy(w.buf.data(), 20, 50, w.ld, e), want) << e;
  }
  EXPECT_EQ(prune::rank_for_energy(std::vector<double>{3, 0}, 1.0), 1);
  EXPECT_EQ(prune::rank_for_energy(std::vector<double>{0, 0}, 0.5), 0);
  EXPECT_THROW(prune::rank_for_energy(std::vector<double>{1}, 1.5), KernelError);
}

TEST(PruneLowrank, CheckMessages) {
  const auto& reg = prune_registry();
  auto v = [](std::int64_t r, std::int64_t c) { return shape_view(DType::f32, r, c); };
  EXPECT_EQ(check(reg, "prune.lowrank", {v(8, 5), v(8, 3), v(3, 5)}, {{"rank", "3"}}), "");
  EXPECT_NE(check(reg, "prune.lowrank", {v(8, 5), v(8, 6), v(6, 5)}, {{"rank", "6"}}).find("param 'rank' is 6"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.lowrank", {v(8, 5), v(8, 0), v(0, 5)}, {{"rank", "0"}}).find("param 'rank' is 0"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.lowrank", {v(8, 5), v(8, 2), v(3, 5)}, {{"rank", "3"}}).find("port 'a' is 8x2"),
            std::string::npos);
  EXPECT_NE(check(reg, "prune.lowrank", {v(8, 5), v(8, 3), v(3, 5)}, {{"rank", "3"}, {"split", "right"}}).find("'split'"),
            std::string::npos);
  std::vector<TensorView> mixed = {v(8, 5), shape_view(DType::f64, 8, 3), v(3, 5)};
  EXPECT_NE(check(reg, "prune.lowrank", mixed, {{"rank", "3"}}).find("dtypes must match"), std::string::npos);
}

}  // namespace
}  // namespace ymlopt::test
