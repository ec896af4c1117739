// cuBLAS, cuBLASLt and cuSPARSE are opened on first use (components/cuda_libs):
// a run that never calls them does not map them (~150 MiB of resident memory
// for cuBLASLt alone), and the first use resolves every entry point. Needs no GPU.
#include <gtest/gtest.h>

#if YMLOPT_HAVE_CUDA
#include "cuda_libs/cuda_libs.hpp"
#include "nn/nn_cuda.hpp"
#include "register_builtin.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>

namespace cl = ymlopt::cuda_libs;

/// The registry interface, enough to register the built-in families.
class MapRegistry final : public ymlopt::Registry {
 public:
  void add(ymlopt::ComponentSpec spec) override {
    const std::string name = spec.name;
    specs_.emplace(name, std::move(spec));
  }
  const ymlopt::ComponentSpec* find(std::string_view name) const override {
    auto it = specs_.find(std::string(name));
    return it == specs_.end() ? nullptr : &it->second;
  }
  std::size_t size() const { return specs_.size(); }

 private:
  std::map<std::string, ymlopt::ComponentSpec> specs_;
};

// In a fresh process (a death-test child re-runs this binary for this test
// alone): with a device, the tests linked before this one have used cuBLAS.
TEST(CudaLibs, NotOpenedByRegistrationOrTheDeviceProbe) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        MapRegistry reg;
        ymlopt::register_builtin_components(reg);
        std::string why;
        (void)ymlopt::nn::cuda::device_available(&why);
        int loaded = 0;
        for (cl::Library lib : {cl::Library::cublas, cl::Library::cublaslt, cl::Library::cusparse})
          if (cl::is_loaded(lib)) {
            std::fprintf(stderr, "%s is mapped before any kernel used it\n", cl::soname(lib));
            ++loaded;
          }
        std::fprintf(stderr, "registered %zu components\n", reg.size());
        std::exit(reg.size() > 30 && loaded == 0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "registered [0-9]+ components");
}

TEST(CudaLibs, FirstUseOpensTheLibraryAndResolvesEveryEntry) {
  const cl::CublasLt& lt = cl::cublaslt();
  EXPECT_TRUE(cl::is_loaded(cl::Library::cublaslt));
  EXPECT_NE(lt.cublasLtMatmul, nullptr);
  // the calls reach the library (its wording differs between CUDA versions)
  ASSERT_NE(lt.cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS), nullptr);
  EXPECT_STRNE(lt.cublasLtGetStatusString(CUBLAS_STATUS_SUCCESS), lt.cublasLtGetStatusString(CUBLAS_STATUS_INVALID_VALUE));
  const cl::Cublas& b = cl::cublas();
  ASSERT_NE(b.cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED), nullptr);
  EXPECT_STRNE(b.cublasGetStatusString(CUBLAS_STATUS_NOT_INITIALIZED), b.cublasGetStatusString(CUBLAS_STATUS_SUCCESS));
  EXPECT_NE(b.cublasSgemm_v2, nullptr);
  const cl::Cusparse& s = cl::cusparse();
  ASSERT_NE(s.cusparseGetErrorString(CUSPARSE_STATUS_SUCCESS), nullptr);
  EXPECT_STRNE(s.cusparseGetErrorString(CUSPARSE_STATUS_SUCCESS), s.cusparseGetErrorString(CUSPARSE_STATUS_INVALID_VALUE));
  EXPECT_NE(s.cusparseSpMM, nullptr);
  EXPECT_EQ(&cl::cusparse(), &s);  // resolved once
  for (cl::Library lib : {cl::Library::cublas, cl::Library::cublaslt, cl::Library::cusparse})
    EXPECT_TRUE(cl::is_loaded(lib)) << cl::soname(lib);
}
#else
TEST(CudaLibs, NotBuilt) { GTEST_SKIP() << "built without nvcc: no CUDA kernels, no CUDA libraries"; }
#endif
