#!/usr/bin/env bash
# Builds StarPU with CUDA from Debian's own source of the StarPU that
# libstarpu-dev installs (Debian builds it without CUDA), into the git-ignored
# cache, and prints its prefix. Needs nvcc (/usr/local/cuda, or CUDA_HOME);
# exits 1, saying why, without one. The build takes ~10 min on 2 cores, once.
#
#   prefix=$(scripts/starpu_cuda.sh) && scripts/setup.sh build -DYMLOPT_STARPU_PREFIX="$prefix"
#
# Two changes for CUDA 13 (StarPU 1.3.10 predates it): cudaDeviceProp lost
# computeMode (read with cudaDeviceGetAttribute instead), and cublas.h and
# cublas_v2.h may no longer meet in one file (starpu_cublas.c calls the v2
# functions by their _v2 names, which cublas.h declares too).
#
# And one change for start-up time: StarPU calls cuBLAS and cuSPARSE only in
# starpu_cublas_init/starpu_cusparse_init (which ymlopt never calls: its
# kernels open them on first use), yet linking them made every process load
# ~700 MB of libraries (+0.5 s per start, +1 s under ASan). The nine functions
# StarPU calls are defined in its own sources (hidden) and forward to the
# library, opened on the first call; without it they return NOT_INITIALIZED.
set -euo pipefail
cd "$(dirname "$0")/.."
version=1.3.10+dfsg
debian_rev=2
sha256=682f3b7454f30493c116c8dcfa76daa014a8983923f904fafddf179d947664d4  # from the .dsc of 1.3.10+dfsg-2
cuda=${CUDA_HOME:-/usr/local/cuda}
if [ ! -x "$cuda/bin/nvcc" ]; then
  echo "starpu_cuda: no nvcc at $cuda/bin/nvcc (set CUDA_HOME): no StarPU with CUDA built" >&2
  exit 1
fi
cache=$PWD/third_party_cache
build_rev=2  # bump when the build changes: a new prefix, so caches rebuild
prefix=$cache/starpu-cuda-$version.$build_rev
if [ -f "$prefix/.built" ]; then
  echo "$prefix"
  exit 0
fi
scripts/setup.sh --deps-only >&2  # hwloc, Open MPI, OpenCL headers, curl: what StarPU builds with
mkdir -p "$cache"
tarball=$cache/starpu_$version.orig.tar.gz
if [ ! -f "$tarball" ] || ! echo "$sha256  $tarball" | sha256sum -c --quiet - 2>/dev/null; then
  echo "starpu_cuda: fetching Debian's StarPU $version-$debian_rev source" >&2
  curl -fsSL -o "$tarball.part" "http://deb.debian.org/debian/pool/main/s/starpu/starpu_$version.orig.tar.gz"
  echo "$sha256  $tarball.part" | sha256sum -c --quiet -
  mv "$tarball.part" "$tarball"
fi
work=$(mktemp -d "$cache/starpu-cuda-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
tar xzf "$tarball" -C "$work"
src=$work/starpu-$version
sed -i 's/if (props\[devid\]\.computeMode == cudaComputeModeExclusive)/int compute_mode = 0;\n\tcudaDeviceGetAttribute(\&compute_mode, cudaDevAttrComputeMode, devid);\n\tif (compute_mode == cudaComputeModeExclusive)/' \
  "$src/src/drivers/cuda/driver_cuda.c"
grep -q cudaDevAttrComputeMode "$src/src/drivers/cuda/driver_cuda.c"
sed -i -e 's/^#include <starpu_cublas_v2.h>$/cublasHandle_t starpu_cublas_get_local_handle(void);/' \
  -e 's/cublasCreate(/cublasCreate_v2(/g; s/cublasSetStream(/cublasSetStream_v2(/g; s/cublasDestroy(/cublasDestroy_v2(/g' \
  "$src/src/drivers/cuda/starpu_cublas.c"
soname() { objdump -p "$cuda/lib64/$1" | awk '$1 == "SONAME" { print $2 }'; }
cublas_so=$(soname libcublas.so)
cusparse_so=$(soname libcusparse.so)
[ -n "$cublas_so" ] && [ -n "$cusparse_so" ] || { echo "starpu_cuda: no cuBLAS/cuSPARSE in $cuda/lib64" >&2; exit 1; }
lazy_open='#include <dlfcn.h>
#include <stdio.h>
static void *ymlopt_lazy_sym(const char *lib, const char *name)
{
	void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
	void *f = h ? dlsym(h, name) : NULL;
	if (!f) fprintf(stderr, "[starpu] %s: %s\n", name, dlerror());
	return f;
}
#define YMLOPT_LAZY(lib, fail, ret, name, params, args) \
	__attribute__((visibility("hidden"))) ret name params \
	{ \
		static ret (*f) params; \
		if (!f) f = (ret (*) params) ymlopt_lazy_sym(lib, #name); \
		return f ? f args : fail; \
	}'
cat >>"$src/src/drivers/cuda/starpu_cublas.c" <<EOF_CUBLAS
#ifdef STARPU_USE_CUDA
$lazy_open
#define YMLOPT_CUBLAS(ret, name, params, args) YMLOPT_LAZY("$cublas_so", CUBLAS_STATUS_NOT_INITIALIZED, ret, name, params, args)
YMLOPT_CUBLAS(cublasStatus, cublasInit, (void), ())
YMLOPT_CUBLAS(cublasStatus, cublasShutdown, (void), ())
YMLOPT_CUBLAS(cublasStatus, cublasSetKernelStream, (cudaStream_t s), (s))
YMLOPT_CUBLAS(cublasStatus_t, cublasCreate_v2, (cublasHandle_t *h), (h))
YMLOPT_CUBLAS(cublasStatus_t, cublasSetStream_v2, (cublasHandle_t h, cudaStream_t s), (h, s))
YMLOPT_CUBLAS(cublasStatus_t, cublasDestroy_v2, (cublasHandle_t h), (h))
#endif
EOF_CUBLAS
cat >>"$src/src/drivers/cuda/starpu_cusparse.c" <<EOF_CUSPARSE
#ifdef HAVE_LIBCUSPARSE
$lazy_open
#define YMLOPT_CUSPARSE(ret, name, params, args) YMLOPT_LAZY("$cusparse_so", CUSPARSE_STATUS_NOT_INITIALIZED, ret, name, params, args)
YMLOPT_CUSPARSE(cusparseStatus_t, cusparseCreate, (cusparseHandle_t *h), (h))
YMLOPT_CUSPARSE(cusparseStatus_t, cusparseSetStream, (cusparseHandle_t h, cudaStream_t s), (h, s))
YMLOPT_CUSPARSE(cusparseStatus_t, cusparseDestroy, (cusparseHandle_t h), (h))
#endif
EOF_CUSPARSE
echo "starpu_cuda: building StarPU $version with CUDA ($("$cuda/bin/nvcc" --version | tail -1)) into $prefix" >&2
mkdir "$src/build"
cd "$src/build"
# only the libraries (with StarPU-MPI) and the tools; CPU workers up to 64
# (Debian's build: 4), the OpenCL driver kept
../configure --prefix="$prefix" --enable-cuda --with-cuda-dir="$cuda" --enable-maxcpus=64 \
  --disable-static --disable-build-examples --disable-build-tests --disable-build-doc --disable-socl --disable-fortran \
  --disable-starpufft --disable-glpk --disable-opengl-render LDFLAGS="-Wl,-rpath,$cuda/lib64" >"$work/configure.log" 2>&1 ||
  { tail -30 "$work/configure.log" >&2; exit 1; }
grep -q '^#define STARPU_USE_CUDA 1' include/starpu_config.h || { echo "starpu_cuda: configure found no CUDA" >&2; exit 1; }
# link neither library (the functions above open them)
grep -rl --include=Makefile --include='*.pc' -e '-lcublas' -e '-lcusparse' . | xargs -r sed -i 's/ -lcublas\b//g; s/ -lcusparse\b//g'
make -j"$(nproc)" >"$work/make.log" 2>&1 || { grep -B2 -A6 'error' "$work/make.log" | head -40 >&2; exit 1; }
if objdump -p src/.libs/libstarpu-1.3.so | grep -E 'NEEDED +lib(cublas|cusparse)'; then
  echo "starpu_cuda: libstarpu still links cuBLAS/cuSPARSE" >&2
  exit 1
fi
rm -rf "$prefix"
make install >"$work/install.log" 2>&1 || { tail -30 "$work/install.log" >&2; exit 1; }
touch "$prefix/.built"
echo "$prefix"
