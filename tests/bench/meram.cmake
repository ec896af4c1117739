# MERAM vs ERAM vs ARPACK IRAM (docs/BENCHMARKS.md, "MERAM"). Needs no engine.
add_executable(ymlopt_bench_meram ${CMAKE_CURRENT_LIST_DIR}/bench_meram.cpp)
target_link_libraries(ymlopt_bench_meram PRIVATE ymlopt::eigen PkgConfig::OPENBLAS PkgConfig::LAPACKE PkgConfig::ARPACK)
add_test(NAME bench_meram_smoke COMMAND ymlopt_bench_meram --n 300 --cd 10 --markov 12 --reps 1 --max-restarts 3000)
set_tests_properties(bench_meram_smoke PROPERTIES LABELS bench TIMEOUT 120)

# MIRAM as shipped vs ARPACK on 20 generated sparse problems, n = 1e5 .. 1e6 (docs/BENCHMARKS.md,
# "Eigensolvers on large sparse problems"); the smoke runs them at 1/500 of the size.
add_executable(ymlopt_bench_eigen_suite ${CMAKE_CURRENT_LIST_DIR}/bench_eigen_suite.cpp)
target_link_libraries(ymlopt_bench_eigen_suite PRIVATE ymlopt::eigen PkgConfig::OPENBLAS PkgConfig::LAPACKE PkgConfig::ARPACK
  Threads::Threads)
add_test(NAME bench_eigen_suite_smoke COMMAND ymlopt_bench_eigen_suite --scale 0.002 --max-restarts 5000)
set_tests_properties(bench_eigen_suite_smoke PROPERTIES LABELS bench TIMEOUT 300)

# meram.xml against ARPACK on small dense problems (docs/BENCHMARKS.md, "Small dense problems: the
# workflow against ARPACK"); the smoke runs one seed of each spectrum at n = 200.
add_test(NAME bench_eigen_small_dense_smoke COMMAND ${CMAKE_CURRENT_LIST_DIR}/eigen_small_dense.sh ${PROJECT_BINARY_DIR} 1 200
         WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(bench_eigen_small_dense_smoke PROPERTIES LABELS bench TIMEOUT 300)
