// Matrices kept sparse on the eigen components' ports (format=csr,
// operator_ports.hpp): every solver component against LAPACK (dgeev, dsyevd) or
// ARPACK on the same matrix (svd_topk: a rectangular CSR against its dense run
// and the exact values), the cycle components against their dense runs,
// eigen.generate and eigen.matrix_market writing CSR, and every lie in the
// index arrays refused with a message naming the port.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <complex>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../components/test_context.hpp"
#include "eigen_registry.hpp"
#include "eigen/eigen.hpp"
#include "eigen/generators.hpp"
#include "eigen/matrix_market.hpp"
#include "eigen/workflow_components.hpp"
#include "eigen_reference.hpp"

namespace {

using namespace ymlopt;
using namespace ymlopt::eigen;
using std::int64_t;
using std::size_t;
using test::Mat;

size_t sz(int64_t v) { return static_cast<size_t>(v); }

using eigtest::registry;
using eigtest::CsrPorts;
using eigtest::run_error;
using eigtest::vec_view;

std::vector<std::complex<double>> by_modulus(std::vector<std::complex<double>> e, int64_t k) {
  std::sort(e.begin(), e.end(), [](auto a, auto b) {
    if (std::abs(std::abs(a) - std::abs(b)) > 1e-12 * std::abs(a)) return std::abs(a) > std::abs(b);
    return a.imag() > b.imag();
  });
  e.resize(sz(k));
  return e;
}


/// n = 300, {3, 2.6 ± 0.5i, 2.2} above a bulk in |z| <= 1.5, about 4 nonzeros per row.
CsrMatrix spectrum_matrix() {
  return matrix_with_spectrum(random_spectrum({{3.0, 0}, {2.6, 0.5}, {2.2, 0}}, 296, 1.5, 0.3, 21), {.seed = 22});
}

TEST(EigenCsr, ArnoldiMeramAndPowerOnCsrMatchDgeev) {
  const CsrMatrix s = spectrum_matrix();
  const int64_t n = s.rows;
  const auto ref = by_modulus(eigref::lapack_geev(to_dense(s), n), 4);
  for (const char* comp : {"eigen.arnoldi", "eigen.meram"}) {
    for (const bool f32 : {false, true}) {
      SCOPED_TRACE(std::string(comp) + (f32 ? " f32 values" : " f64 values"));
      Mat<double> re(1, 4), im(1, 4), vre(n, 4), vim(n, 4);
      std::map<std::string, std::string> args = {{"k", "4"}, {"format", "csr"}, {"tol", "1e-9"}};
      if (std::string(comp) == "eigen.arnoldi") args["subspace"] = "14";
      else args["subspaces"] = "8,12";
      std::map<std::string, double> rep;
      if (f32) {
        // f32 values: the products are exact, so the reference is dgeev of the rounded matrix
        CsrMatrix r = s;
        for (double& v : r.val) v = double(float(v));
        const auto ref32 = by_modulus(eigref::lapack_geev(to_dense(r), n), 4);
        CsrPorts<float> p(s, s.nnz() + 7);
        Mat<float> re32(1, 4), im32(1, 4);
        rep = test::run(registry(), comp,
                        {p.a(), vec_view(re32), vec_view(im32), TensorView{}, TensorView{}, p.index(), p.rows()}, args);
        for (int j = 0; j < 4; ++j)
          EXPECT_LE(std::abs(std::complex<double>(re32(0, j), im32(0, j)) - ref32[sz(j)]), 1e-5 * std::abs(ref32[sz(j)]))
              << j;
        continue;
      }
      CsrPorts<double> p(s, s.nnz() + 7, 123.0);  // the tail is never read
      rep = test::run(registry(), comp,
                      {p.a(), vec_view(re), vec_view(im), vre.view(), vim.view(), p.index(), p.rows()}, args);
      for (int j = 0; j < 4; ++j)
        EXPECT_LE(std::abs(std::complex<double>(re(0, j), im(0, j)) - ref[sz(j)]), 1e-8 * std::abs(ref[sz(j)])) << j;
      EXPECT_GT(rep.at("matvecs"), 0);
    }
  }
  Mat<double> value(1, 1), vector(1, n);
  CsrPorts<double> p(s, s.nnz());
  test::run(registry(), "eigen.power", {p.a(), vec_view(value), vec_view(vector), p.index(), p.rows()},
            {{"format", "csr"}, {"max_iter", "5000"}});
  EXPECT_NEAR(value(0, 0), 3.0, 1e-6);
}

TEST(EigenCsr, LanczosOnASymmetricCsrMatchesDsyevdAndRefusesANonSymmetricOne) {
  // 2-D Laplacian (5-point, 17 x 23 grid: simple eigenvalues), symmetric, clustered at both ends.
  const int64_t ny = 17, nx = 23, n = nx * ny;
  CsrMatrix s;
  s.rows = s.cols = n;
  s.row_ptr.push_back(0);
  for (int64_t i = 0; i < ny; ++i)
    for (int64_t j = 0; j < nx; ++j) {
      auto put = [&](int64_t c, double v) { s.col.push_back(c), s.val.push_back(v); };
      if (i > 0) put((i - 1) * nx + j, -1);
      if (j > 0) put(i * nx + j - 1, -1);
      put(i * nx + j, 4);
      if (j + 1 < nx) put(i * nx + j + 1, -1);
      if (i + 1 < ny) put((i + 1) * nx + j, -1);
      s.row_ptr.push_back(static_cast<int64_t>(s.val.size()));
    }
  std::vector<double> all = eigref::lapack_syevd(to_dense(s), n);
  CsrPorts<double> p(s, s.nnz());
  Mat<double> values(1, 5), vectors(n, 5);
  test::run(registry(), "eigen.lanczos", {p.a(), vec_view(values), vectors.view(), p.index(), p.rows()},
            {{"k", "5"}, {"format", "csr"}, {"tol", "1e-10"}});
  for (int j = 0; j < 5; ++j) EXPECT_NEAR(values(0, j), all[sz(n - 1 - j)], 1e-8 * all.back()) << j;

  const CsrMatrix ns = spectrum_matrix();
  CsrPorts<double> q(ns, ns.nnz());
  Mat<double> v2(1, 2);
  const std::string e =
      run_error("eigen.lanczos", {q.a(), vec_view(v2), TensorView{}, q.index(), q.rows()}, {{"k", "2"}, {"format", "csr"}});
  EXPECT_EQ(e.rfind("port 'a' is not symmetric: |a[", 0), 0u) << e;
}

TEST(EigenCsr, SvdOfARectangularCsrMatchesTheDenseRunAndTheExactValues) {
  // A [300, 200] = P diag(10 * 0.7^i) Q (permutations): its singular values are the diagonal's.
  const int64_t m = 300, n = 200, k = 5;
  std::vector<int64_t> rp(static_cast<size_t>(m)), cp(static_cast<size_t>(n));
  for (int64_t i = 0; i < m; ++i) rp[sz(i)] = (i * 7 + 3) % m;  // 7 and 300 coprime
  for (int64_t j = 0; j < n; ++j) cp[sz(j)] = (j * 13 + 5) % n;  // 13 and 200 coprime
  std::vector<double> dense(static_cast<size_t>(m * n), 0.0);
  for (int64_t i = 0; i < n; ++i) dense[sz(rp[sz(i)] * n + cp[sz(i)])] = 10 * std::pow(0.7, double(i));
  CsrMatrix s;
  s.rows = m;
  s.cols = n;
  s.row_ptr.push_back(0);
  for (int64_t i = 0; i < m; ++i) {
    for (int64_t j = 0; j < n; ++j)
      if (dense[sz(i * n + j)] != 0) s.col.push_back(j), s.val.push_back(dense[sz(i * n + j)]);
    s.row_ptr.push_back(s.nnz());
  }
  Mat<double> a(m, n);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) a(i, j) = dense[sz(i * n + j)];
  const std::map<std::string, std::string> args = {{"k", "5"}, {"seed", "3"}};
  Mat<double> sd(1, k), ud(m, k), vd(k, n), sc(1, k), uc(m, k), vc(k, n);
  test::run(registry(), "eigen.svd_topk", {a.view(), vec_view(sd), ud.view(), vd.view()}, args);
  CsrPorts<double> p(s, s.nnz() + 4);
  auto csr = args;
  csr["format"] = "csr";
  csr["cols"] = "200";
  const auto rep =
      test::run(registry(), "eigen.svd_topk", {p.a(), vec_view(sc), uc.view(), vc.view(), p.index(), p.rows()}, csr);
  for (int64_t j = 0; j < k; ++j) {
    EXPECT_NEAR(sc(0, j), 10 * std::pow(0.7, double(j)), 1e-8) << j;
    EXPECT_NEAR(sc(0, j), sd(0, j), 1e-10) << j;
  }
  EXPECT_LT(rep.at("residual"), 1e-6);
  // columns 201.. do not exist: a lying column index is refused
  csr["cols"] = "150";
  EXPECT_EQ(run_error("eigen.svd_topk", {p.a(), vec_view(sc), TensorView{}, TensorView{}, p.index(), p.rows()}, csr)
                .rfind("port 'a_index' entry ", 0),
            0u);
}

TEST(EigenCsr, CycleLoopsOnCsrMatchArpack) {
  // A sparse non-normal matrix (n = 3000, {3, 2.6 ± 0.5i, 2.2} above a bulk in |z| <= 1.5) through
  // eigen.generate format=csr, then <until>-style loops of both cycle components on the CSR ports.
  const int64_t n = 3000, k = 3, m = 20, cap = 8 * n;
  Mat<double> val(1, cap);
  Mat<std::int32_t> col(1, cap), ptr(1, n + 1);
  const auto rep = test::run(registry(), "eigen.generate", {vec_view(val), vec_view(col), vec_view(ptr)},
                             {{"top", "3, 2.6+0.5i, 2.2"}, {"radius", "1.5"}, {"seed", "21"}, {"matrix_seed", "22"},
                              {"format", "csr"}});
  const CsrMatrix s =
      matrix_with_spectrum(random_spectrum({{3.0, 0}, {2.6, 0.5}, {2.2, 0}}, n - 4, 1.5, 0.3, 21), {.seed = 22});
  ASSERT_EQ(rep.at("nnz"), double(s.nnz()));
  const LinearOperator op = csr_operator(s);
  const eigref::ArpackResult ar = eigref::arpack_nonsymmetric(op.apply, n, k, "LM", m, 1e-12);
  ASSERT_EQ(ar.info, 0);
  std::vector<std::complex<double>> ref;
  for (size_t j = 0; j < ar.re.size(); ++j) ref.emplace_back(ar.re[j], ar.im[j]);
  ref = by_modulus(ref, k);
  for (const char* comp : {"eigen.eram_cycle", "eigen.iram_cycle"}) {
    SCOPED_TRACE(comp);
    const bool implicit = std::string(comp) == "eigen.iram_cycle";
    Mat<double> v(n, k, 0, DType::f64, 0.0), vals(k, 3, 0, DType::f64, 0.0), res(1, 1), basis(m + 1, n, 0, DType::f64, 0.0),
        hess(m + 1, m, 0, DType::f64, 0.0), state(k + 1, 3, 0, DType::f64, 0.0);
    TensorView r = res.view();
    r.shape = {1};
    std::vector<TensorView> ports = {vec_view(val), v.view(), vals.view(), r};
    if (implicit) ports.insert(ports.end(), {basis.view(), hess.view(), state.view()});
    ports.insert(ports.end(), {vec_view(col), vec_view(ptr)});
    int cycles = 0;
    do {
      test::run(registry(), comp, ports,
                {{"k", "3"}, {"subspace", "20"}, {"tol", "1e-9"}, {"format", "csr"}, {"seed", "3"}});
    } while (res(0, 0) > 1e-9 && ++cycles < 3000);
    ASSERT_LE(res(0, 0), 1e-9);
    for (int64_t j = 0; j < k; ++j)
      EXPECT_LE(std::abs(std::complex<double>(vals(j, 0), vals(j, 1)) - ref[sz(j)]), 1e-8 * std::abs(ref[sz(j)])) << j;
  }
}

std::string temp_path(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("ymlopt_csr_ports_test_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return (dir / name).string();
}

TEST(EigenCsr, MatrixMarketAndGenerateWriteCsrAndNameTheCountThatDoesNotFit) {
  const CsrMatrix s = spectrum_matrix();
  const std::string path = temp_path("general.mtx");
  write_matrix_market(path, s, "csr_ports_test");
  Mat<double> val(1, s.nnz() + 3);
  Mat<std::int32_t> col(1, s.nnz() + 3), ptr(1, s.rows + 1);
  const std::vector<TensorView> ports = {vec_view(val), vec_view(col), vec_view(ptr)};
  const auto rep = test::run(registry(), "eigen.matrix_market", ports, {{"path", path}, {"format", "csr"}});
  EXPECT_EQ(rep.at("nnz"), double(s.nnz()));
  for (int64_t i = 0; i <= s.rows; ++i) ASSERT_EQ(ptr(0, i), s.row_ptr[sz(i)]) << i;
  for (int64_t e = 0; e < s.nnz(); ++e) {
    ASSERT_EQ(col(0, e), s.col[sz(e)]) << e;
    ASSERT_EQ(val(0, e), s.val[sz(e)]) << e;  // 17 digits: exact
  }
  for (int64_t e = s.nnz(); e < s.nnz() + 3; ++e) EXPECT_EQ(val(0, e), 0.0);

  // symmetric and pattern files: the stored half mirrored, pattern entries 1
  const std::string sym = temp_path("sym.mtx");
  std::ofstream(sym) << "%%MatrixMarket matrix coordinate pattern symmetric\n3 3 3\n1 1\n2 1\n3 2\n";
  Mat<float> sv(1, 6);
  Mat<std::int32_t> sc(1, 6), sp(1, 4);
  test::run(registry(), "eigen.matrix_market", {vec_view(sv), vec_view(sc), vec_view(sp)},
            {{"path", sym}, {"format", "csr"}});
  EXPECT_EQ((std::vector<std::int32_t>(sp.buf.begin(), sp.buf.end())), (std::vector<std::int32_t>{0, 2, 4, 5}));
  EXPECT_EQ((std::vector<std::int32_t>(sc.buf.begin(), sc.buf.begin() + 5)), (std::vector<std::int32_t>{0, 1, 0, 2, 1}));
  for (int e = 0; e < 5; ++e) EXPECT_EQ(sv(0, e), 1.0f);

  Mat<double> small(1, 4);
  Mat<std::int32_t> small_col(1, 4);
  EXPECT_EQ(run_error("eigen.matrix_market", {vec_view(small), vec_view(small_col), vec_view(ptr)},
                      {{"path", path}, {"format", "csr"}}),
            path + ": the matrix has " + std::to_string(s.nnz()) + " nonzeros but ports 'a' and 'a_index' hold 4: size "
            "them [" + std::to_string(s.nnz()) + "] or more");
  Mat<std::int32_t> ptr_short(1, s.rows);
  EXPECT_EQ(run_error("eigen.matrix_market", {vec_view(val), vec_view(col), vec_view(ptr_short)},
                      {{"path", path}, {"format", "csr"}}),
            path + " holds a 300x300 matrix (" + std::to_string(s.nnz()) + " entries stored, up to " +
                std::to_string(s.nnz()) + " nonzeros) but port 'a_ptr' is 1x300 (shape 300): it needs rows + 1 = 301 "
                "pointers");
  EXPECT_EQ(test::check(registry(), "eigen.generate", {vec_view(val), vec_view(col), vec_view(ptr)},
                        {{"kind", "schur"}, {"format", "csr"}}),
            "kind 'schur' makes a dense matrix (Q T Qᵀ): use format=dense");
  Mat<double> gv(1, 10);
  Mat<std::int32_t> gc(1, 10), gp(1, 145);
  EXPECT_EQ(run_error("eigen.generate", {vec_view(gv), vec_view(gc), vec_view(gp)},
                      {{"kind", "convection_diffusion"}, {"format", "csr"}}),
            "eigen.generate kind 'convection_diffusion': the matrix has 672 nonzeros but ports 'a' and 'a_index' hold "
            "10: size them [672] or more");
  std::filesystem::remove_all(std::filesystem::path(path).parent_path());
}

TEST(EigenCsr, LyingArraysAndMismatchedPortsAreRefused) {
  CsrMatrix s;
  s.rows = s.cols = 3;
  s.row_ptr = {0, 2, 3, 4};
  s.col = {0, 1, 1, 2};
  s.val = {2, 1, 3, 4};
  Mat<double> v(1, 1);
  const std::map<std::string, std::string> csr = {{"format", "csr"}, {"max_iter", "50"}};
  auto power_error = [&](CsrPorts<double>& p) {
    return run_error("eigen.power", {p.a(), vec_view(v), TensorView{}, p.index(), p.rows()}, csr);
  };
  struct Lie {
    bool in_ptr;  // else in the columns
    int64_t at;
    std::int32_t value;
    const char* message;
  };
  for (const Lie& lie : {Lie{true, 2, 1, "port 'a_ptr' decreases at row 1 (2 -> 1)"},
                         Lie{false, 3, 3, "port 'a_index' entry 3 is column 3, outside [0, 3)"},
                         Lie{true, 3, 9, "port 'a_ptr' ends at 9 but ports 'a' and 'a_index' hold 4 values"},
                         Lie{true, 0, 1, "port 'a_ptr' starts at 1: row pointers start at 0"}}) {
    CsrPorts<double> p(s, 4);
    (lie.in_ptr ? p.ptr : p.col)(0, lie.at) = lie.value;
    EXPECT_EQ(power_error(p), lie.message);
  }
  const auto& r = registry();
  auto sv = [](DType t, int64_t cols) {
    TensorView v = test::shape_view(t, 1, cols);
    v.shape = {cols};
    return v;
  };
  const TensorView a = sv(DType::f64, 8), idx = sv(DType::i32, 8), ptr = sv(DType::i32, 4), vals = sv(DType::f64, 2);
  EXPECT_EQ(test::check(r, "eigen.arnoldi", {a, vals, vals, TensorView{}, TensorView{}, idx, ptr},
                        {{"k", "2"}, {"format", "csr"}}),
            "");
  EXPECT_EQ(test::check(r, "eigen.arnoldi", {a, vals, vals}, {{"k", "2"}, {"format", "csr"}}),
            "format=csr needs ports 'a_index' (columns) and 'a_ptr' (row pointers)");
  EXPECT_EQ(test::check(r, "eigen.arnoldi", {a, vals, vals, TensorView{}, TensorView{}, sv(DType::i32, 7), ptr},
                        {{"k", "2"}, {"format", "csr"}}),
            "port 'a_index' is 1x7 (shape 7) but port 'a' holds 8 values: one column per value");
  EXPECT_EQ(test::check(r, "eigen.arnoldi",
                        {test::shape_view(DType::f64, 3, 3), vals, vals, TensorView{}, TensorView{}, idx, ptr},
                        {{"k", "2"}}),
            "port 'a_index' is only read with format=csr (this task has format=dense)");
  EXPECT_EQ(test::check(r, "eigen.arnoldi", {a, vals, vals, TensorView{}, TensorView{}, idx, ptr},
                        {{"k", "2"}, {"format", "coo"}}),
            "param 'format' is 'coo': expected one of 'dense', 'csr'");
  EXPECT_EQ(test::check(r, "eigen.lanczos", {test::shape_view(DType::f64, 5, 3), vals, TensorView{}, idx, ptr},
                        {{"k", "2"}, {"operator", "gram"}, {"format", "csr"}}),
            "format=csr needs operator=matrix (operator=gram takes a dense X [m,n])");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle",
                        {a, test::shape_view(DType::f64, 3, 1), test::shape_view(DType::f64, 1, 3),
                         test::shape_view(DType::f64, 1, 1), idx, ptr},
                        {{"k", "1"}, {"format", "csr"}}),
            "");
  EXPECT_EQ(test::check(r, "eigen.eram_cycle",
                        {a, test::shape_view(DType::f64, 4, 1), test::shape_view(DType::f64, 1, 3),
                         test::shape_view(DType::f64, 1, 1), idx, ptr},
                        {{"k", "1"}, {"format", "csr"}}),
            "port 'vectors' is 4x1 but expected 3x1 (n x k Ritz vectors)");
}

}  // namespace
