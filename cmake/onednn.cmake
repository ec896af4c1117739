# oneDNN's dnnl_sgemm for the f32 GEMM inside tasks (components/gemm). On the
# 2-core AVX-512 machines it runs a 512-tile of a 4096 matrix ~1.15x faster
# than single-threaded OpenBLAS sgemm (docs/BENCHMARKS.md "Tiled GEMM").
# Found by header and library, not by Debian's dnnl-config.cmake, which asks for
# OpenCL (its GPU runtime) that the CPU path never uses.
#
#   cmake -S . -B build -DYMLOPT_ONEDNN=OFF   # OpenBLAS sgemm everywhere
set(YMLOPT_ONEDNN "AUTO" CACHE STRING "f32 GEMM in tasks from oneDNN: AUTO (when libdnnl-dev is found), ON (required) or OFF")
set_property(CACHE YMLOPT_ONEDNN PROPERTY STRINGS AUTO ON OFF)
set(YMLOPT_HAVE_ONEDNN OFF)
if(NOT YMLOPT_ONEDNN STREQUAL "OFF")
  find_path(ONEDNN_INCLUDE_DIR oneapi/dnnl/dnnl.h)
  find_library(ONEDNN_LIBRARY dnnl)
  find_package(OpenMP COMPONENTS CXX)
  if(ONEDNN_INCLUDE_DIR AND ONEDNN_LIBRARY AND OpenMP_CXX_FOUND)
    add_library(ymlopt_onednn INTERFACE IMPORTED)
    target_include_directories(ymlopt_onednn INTERFACE ${ONEDNN_INCLUDE_DIR})
    target_link_libraries(ymlopt_onednn INTERFACE ${ONEDNN_LIBRARY} OpenMP::OpenMP_CXX)
    set(YMLOPT_HAVE_ONEDNN ON)
    message(STATUS "ymlopt: f32 GEMM in tasks from oneDNN (${ONEDNN_LIBRARY})")
  elseif(YMLOPT_ONEDNN STREQUAL "ON")
    message(FATAL_ERROR "YMLOPT_ONEDNN=ON but oneDNN was not found (apt-get install libdnnl-dev)")
  else()
    message(STATUS "ymlopt: oneDNN not found, f32 GEMM in tasks from OpenBLAS")
  endif()
endif()
