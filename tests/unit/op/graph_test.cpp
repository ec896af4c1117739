// op.random_graph (a GCN adjacency in CSR) and op.csr_matmul (CSR times dense)
// against dense references; lying row pointers and columns, and too little
// room, are refused with the entry or the count.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "../components/test_context.hpp"
#include "op/op.hpp"
#include "op/semiring.hpp"

namespace {

using namespace ymlopt;
using std::int64_t;
using test::Mat;

const test::TestRegistry& registry() {
  static const test::TestRegistry reg = [] {
    test::TestRegistry r;
    register_op(r);
    return r;
  }();
  return reg;
}

std::string run_error(const std::string& name, std::vector<TensorView> ports,
                      const std::map<std::string, std::string>& args) {
  return test::run_error(registry(), name, std::move(ports), args);
}

TEST(OpGraph, RandomGraphIsASymmetricNormalisedAdjacencyAndItsProductIsTheDenseOne) {
  const int64_t n = 200, cap = 4000, f = 5;
  Mat<float> val(1, cap);
  Mat<std::int32_t> col(1, cap, 0, DType::i32), ptr(1, n + 1, 0, DType::i32);
  const auto rep = test::run(registry(), "op.random_graph", {val.view(), col.view(), ptr.view()},
                             {{"degree", "6"}, {"seed", "4"}});
  const int64_t nnz = ptr(0, n);
  EXPECT_EQ(rep.at("nnz"), double(nnz));
  std::vector<double> dense(size_t(n * n), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int32_t e = ptr(0, i); e < ptr(0, i + 1); ++e) dense[size_t(i * n + col(0, e))] = val(0, e);
  std::vector<int64_t> deg(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) deg[size_t(i)] = ptr(0, i + 1) - ptr(0, i);
  for (int64_t i = 0; i < n; ++i) {
    EXPECT_GT(dense[size_t(i * n + i)], 0.0) << "self loop " << i;
    for (int64_t j = 0; j < n; ++j) {
      ASSERT_EQ(dense[size_t(i * n + j)], dense[size_t(j * n + i)]) << i << "," << j;
      if (dense[size_t(i * n + j)] != 0) {
        ASSERT_NEAR(dense[size_t(i * n + j)], 1 / std::sqrt(double(deg[size_t(i)] * deg[size_t(j)])), 1e-6);
      }
    }
  }
  // Y = Â X, whole and as two row blocks (the second with accumulate onto a start value).
  Mat<float> x(n, f), y(n, f, 0, DType::f32, 0.0f);
  x.random(2);
  test::run(registry(), "op.csr_matmul", {val.view(), col.view(), ptr.view(), x.view(), y.view()}, {});
  for (int64_t i = 0; i < n; ++i)
    for (int64_t k = 0; k < f; ++k) {
      double want = 0;
      for (int64_t j = 0; j < n; ++j) want += dense[size_t(i * n + j)] * x(j, k);
      ASSERT_NEAR(y(i, k), want, 1e-5) << i << "," << k;
    }
  Mat<float> y2(3, f, 0, DType::f32, 1.0f);
  TensorView rows = ptr.view();  // rows 10..12: pointers into the whole arrays
  rows.data = &ptr(0, 10);
  rows.cols = 4;
  rows.shape = {1, 4};
  test::run(registry(), "op.csr_matmul", {val.view(), col.view(), rows, x.view(), y2.view()}, {{"accumulate", "true"}});
  for (int64_t i = 0; i < 3; ++i)
    for (int64_t k = 0; k < f; ++k) EXPECT_NEAR(y2(i, k), 1.0f + y(10 + i, k), 1e-6);
}

TEST(OpGraph, CsrMatmulIsaPathsGiveTheScalarValues) {
  const int64_t n = 300, cap = 6000;
  Mat<float> val(1, cap);
  Mat<std::int32_t> col(1, cap, 0, DType::i32), ptr(1, n + 1, 0, DType::i32);
  test::run(registry(), "op.random_graph", {val.view(), col.view(), ptr.view()}, {{"degree", "10"}});
  for (int64_t f : {1, 7, 16, 37, 64}) {
    Mat<float> x(n, f + 3);
    x.random(5);
    std::vector<float> ref(size_t(n * f)), got(size_t(n * f));
    op::csr_matmul(val.buf.data(), col.buf.data(), ptr.buf.data(), n, cap, x.buf.data(), f + 3, n, f, ref.data(), f,
                   false, op::Isa::scalar);
    std::vector<op::Isa> isas;
    if (op::cpu_has_avx2()) isas.push_back(op::Isa::avx2);
    if (op::cpu_has_avx512()) isas.push_back(op::Isa::avx512);
    for (op::Isa isa : isas) {
      op::csr_matmul(val.buf.data(), col.buf.data(), ptr.buf.data(), n, cap, x.buf.data(), f + 3, n, f, got.data(), f,
                     false, isa);
      EXPECT_EQ(got, ref) << "f " << f << " isa " << int(isa);
    }
  }
}

TEST(OpGraph, BacktrackFollowsTheBackPointers) {
  // 4 steps, 3 states: the best last state is 2, and back: 2 <- 0 <- 1 <- (row 0 unused).
  Mat<std::int32_t> arg(4, 3, 0, DType::i32, 0);
  arg(3, 2) = 0;
  arg(2, 0) = 1;
  arg(1, 1) = 2;
  Mat<float> last(1, 3);
  last(0, 0) = -5;
  last(0, 1) = -7;
  last(0, 2) = -1;
  Mat<std::int32_t> path(1, 4, 0, DType::i32);
  const auto rep = test::run(registry(), "op.backtrack", {arg.view(), last.view(), path.view()}, {});
  EXPECT_EQ(rep.at("score"), -1.0);
  EXPECT_EQ(path.buf, (std::vector<std::int32_t>{2, 1, 0, 2}));
  test::run(registry(), "op.backtrack", {arg.view(), last.view(), path.view()}, {{"want", "min"}});
  EXPECT_EQ(path(0, 3), 1);
  arg(3, 2) = 9;
  EXPECT_EQ(run_error("op.backtrack", {arg.view(), last.view(), path.view()}, {}),
            "port 'arg' step 3 state 2 points to 9: not a state in [0, 3)");
  EXPECT_EQ(test::check(registry(), "op.backtrack",
                        {test::shape_view(DType::i32, 0, 3), last.view(), test::shape_view(DType::i32, 1, 0)}, {}),
            "port 'arg' is 0x3: at least one step and one state");
  Mat<std::int32_t> short_path(1, 3, 0, DType::i32);
  EXPECT_EQ(test::check(registry(), "op.backtrack", {arg.view(), last.view(), short_path.view()}, {}),
            "port 'path' is 1x3 but port 'arg' has 4 steps");
}

TEST(OpGraph, LiesAndTooLittleRoomAreRefused) {
  const int64_t n = 50;
  Mat<float> small(1, 60), x(n, 2), y(n, 2);
  Mat<std::int32_t> scol(1, 60, 0, DType::i32), ptr(1, n + 1, 0, DType::i32);
  const std::string e = run_error("op.random_graph", {small.view(), scol.view(), ptr.view()}, {{"degree", "6"}});
  EXPECT_NE(e.find("nonzeros (edges both ways and self loops) but port 'a' has room for 60"), std::string::npos) << e;
  EXPECT_EQ(test::check(registry(), "op.random_graph", {small.view(), scol.view(), ptr.view()}, {{"degree", "50"}}),
            "param 'degree' is 50: must be in [0, n - 1 = 49]");
  Mat<float> val(1, 400);
  Mat<std::int32_t> col(1, 400, 0, DType::i32);
  test::run(registry(), "op.random_graph", {val.view(), col.view(), ptr.view()}, {{"degree", "4"}});
  x.random(1);
  col(0, 7) = int32_t(n);
  EXPECT_EQ(run_error("op.csr_matmul", {val.view(), col.view(), ptr.view(), x.view(), y.view()}, {}),
            "port 'a_index' entry 7 is 50: columns are in [0, 50)");
  col(0, 7) = 0;
  ptr(0, 9) = 401;
  EXPECT_EQ(run_error("op.csr_matmul", {val.view(), col.view(), ptr.view(), x.view(), y.view()}, {}),
            "port 'a_ptr' entry 9 is 401: row pointers must not decrease and stay <= 400");
  Mat<float> wide(n, 3);
  EXPECT_EQ(test::check(registry(), "op.csr_matmul", {val.view(), col.view(), ptr.view(), x.view(), wide.view()}, {}),
            "port 'y' is 50x3 but A has 50 rows and X is 50x2: y takes at most A's rows and X's columns");
}

}  // namespace
