# Eigensolvers vs ARPACK/LAPACK (docs/BENCHMARKS.md, "Eigensolvers vs ARPACK").
# Needs no engine: the solvers are called directly.
add_executable(ymlopt_bench_eigen ${CMAKE_CURRENT_LIST_DIR}/bench_eigen.cpp)
target_link_libraries(ymlopt_bench_eigen PRIVATE ymlopt::eigen PkgConfig::OPENBLAS PkgConfig::LAPACKE PkgConfig::ARPACK)
add_test(NAME bench_eigen_smoke COMMAND ymlopt_bench_eigen --n 200 --k 4 --ncv 12 --nsp 150 --kn 5 --ncvn 20
  --cd 8 --svd-m 120 --svd-n 80 --svd-k 5 --reps 1)
set_tests_properties(bench_eigen_smoke PROPERTIES LABELS bench TIMEOUT 120)
