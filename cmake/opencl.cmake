# OpenCL kernels (issue 31): found by CMake's FindOpenCL (the ICD loader and its
# headers) and CLBlast by pkg-config, or by library and header. Both are
# optional: without them nothing OpenCL is built and `ymlopt info` says so.
# Defines YMLOPT_HAVE_OPENCL / YMLOPT_HAVE_CLBLAST (CMake variables here, compile
# definitions on ymlopt::opencl and everything that links it).
#
#   cmake -S . -B build -DYMLOPT_OPENCL=OFF   # never
set(YMLOPT_OPENCL "AUTO" CACHE STRING "Build the OpenCL kernels: AUTO (when OpenCL is found), ON (required) or OFF")
set_property(CACHE YMLOPT_OPENCL PROPERTY STRINGS AUTO ON OFF)
set(YMLOPT_HAVE_OPENCL OFF)
set(YMLOPT_HAVE_CLBLAST OFF)
if(NOT YMLOPT_OPENCL STREQUAL "OFF")
  find_package(OpenCL)
  if(OpenCL_FOUND)
    set(YMLOPT_HAVE_OPENCL ON)
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(CLBLAST QUIET IMPORTED_TARGET clblast)
    endif()
    if(CLBLAST_FOUND)
      add_library(ymlopt_clblast INTERFACE IMPORTED)
      target_link_libraries(ymlopt_clblast INTERFACE PkgConfig::CLBLAST)
      set(YMLOPT_HAVE_CLBLAST ON)
    else()
      find_path(CLBLAST_INCLUDE_DIR clblast_c.h)
      find_library(CLBLAST_LIBRARY clblast)
      if(CLBLAST_INCLUDE_DIR AND CLBLAST_LIBRARY)
        add_library(ymlopt_clblast INTERFACE IMPORTED)
        target_include_directories(ymlopt_clblast INTERFACE ${CLBLAST_INCLUDE_DIR})
        target_link_libraries(ymlopt_clblast INTERFACE ${CLBLAST_LIBRARY})
        set(YMLOPT_HAVE_CLBLAST ON)
      endif()
    endif()
    message(STATUS "ymlopt: OpenCL kernels built (OpenCL ${OpenCL_VERSION_STRING}, CLBlast ${YMLOPT_HAVE_CLBLAST})")
  elseif(YMLOPT_OPENCL STREQUAL "ON")
    message(FATAL_ERROR "YMLOPT_OPENCL=ON but OpenCL was not found (apt-get install ocl-icd-opencl-dev opencl-c-headers)")
  else()
    message(STATUS "ymlopt: OpenCL not found, OpenCL kernels not built")
  endif()
endif()

# ymlopt_add_opencl_kernels(<family>): adds components/<family>/*_opencl.cpp
# (OpenCL C sources held as strings, built per device by ymlopt::opencl) to
# ymlopt::<family> and links ymlopt::opencl, which exports YMLOPT_HAVE_OPENCL=1
# to everything that links the family, so `#if YMLOPT_HAVE_OPENCL` attaches the
# kernels (ComponentSpec::opencl). The family's own source list leaves
# *_opencl.cpp out. No OpenCL: nothing.
#
#   ymlopt_add_opencl_kernels(tensor)
function(ymlopt_add_opencl_kernels family)
  if(NOT YMLOPT_HAVE_OPENCL)
    return()
  endif()
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*_opencl.cpp)
  if(srcs)
    target_sources(ymlopt_${family} PRIVATE ${srcs})
    target_link_libraries(ymlopt_${family} PUBLIC ymlopt::opencl)
  endif()
endfunction()
