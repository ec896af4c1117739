# CUDA kernels (issue 7). They are built whenever nvcc is found, whatever the
# StarPU at hand was built with, so they compile in CI (no GPU, Debian's StarPU
# without CUDA) and cannot rot; whether StarPU can run them is read from
# starpu_config.h at run time (`ymlopt info`).
#
#   cmake -S . -B build -DYMLOPT_CUDA=OFF           # never
#   cmake -S . -B build -DCMAKE_CUDA_ARCHITECTURES=80 # another GPU than sm_90
set(YMLOPT_CUDA "AUTO" CACHE STRING "Build the CUDA kernels: AUTO (when nvcc is found), ON (required) or OFF")
set_property(CACHE YMLOPT_CUDA PROPERTY STRINGS AUTO ON OFF)
set(YMLOPT_HAVE_CUDA OFF)
if(NOT YMLOPT_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90)
    endif()
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(YMLOPT_HAVE_CUDA ON)
    message(STATUS "ymlopt: CUDA kernels built with nvcc ${CMAKE_CUDA_COMPILER_VERSION} for sm_${CMAKE_CUDA_ARCHITECTURES}")
  elseif(YMLOPT_CUDA STREQUAL "ON")
    message(FATAL_ERROR "YMLOPT_CUDA=ON but no CUDA compiler was found (set CMAKE_CUDA_COMPILER or CUDACXX to nvcc)")
  else()
    message(STATUS "ymlopt: no nvcc found, CUDA kernels not built")
  endif()
endif()

# ymlopt_add_cuda_kernels(<family>): builds components/<family>/*_cuda.cu
# (C++17 for nvcc, no SDK headers) into ymlopt::<family>_cuda, linked publicly
# into ymlopt::<family> with the CUDA runtime and ymlopt::cuda_libs (cuBLAS,
# cuBLASLt and cuSPARSE are opened on first use, not linked). Exports the
# compile definition YMLOPT_HAVE_CUDA=1 to everything that links the family, so
# `#if YMLOPT_HAVE_CUDA` attaches the kernels (ComponentSpec::cuda). No nvcc: nothing.
#
#   ymlopt_add_cuda_kernels(sparse)
function(ymlopt_add_cuda_kernels family)
  if(NOT YMLOPT_HAVE_CUDA)
    return()
  endif()
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_cuda.cu)
  if(NOT srcs)
    return()
  endif()
  add_library(ymlopt_${family}_cuda STATIC ${srcs})
  add_library(ymlopt::${family}_cuda ALIAS ymlopt_${family}_cuda)
  set_target_properties(ymlopt_${family}_cuda PROPERTIES CUDA_STANDARD 17 CUDA_STANDARD_REQUIRED ON)
  target_include_directories(ymlopt_${family}_cuda PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/..)
  target_link_libraries(ymlopt_${family}_cuda PUBLIC CUDA::cudart ymlopt::cuda_libs)
  target_compile_definitions(ymlopt_${family}_cuda PUBLIC YMLOPT_HAVE_CUDA=1
    PRIVATE YMLOPT_CUDA_ARCHS="${CMAKE_CUDA_ARCHITECTURES}")
  target_link_libraries(ymlopt_${family} PUBLIC ymlopt::${family}_cuda)
endfunction()
