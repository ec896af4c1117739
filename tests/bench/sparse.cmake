# Sparse linear kernels (CSR, BSR, 2:4) vs OpenBLAS sgemm; see docs/BENCHMARKS.md.
# Links the sparse family only (no engine): the kernels are called directly.
add_executable(ymlopt_bench_sparse ${CMAKE_CURRENT_LIST_DIR}/bench_sparse.cpp)
target_link_libraries(ymlopt_bench_sparse PRIVATE ymlopt::sparse PkgConfig::OPENBLAS Threads::Threads)
add_test(NAME bench_sparse_smoke COMMAND ymlopt_bench_sparse --shapes 768x768 --m 1,16,70 --threads 1,2
  --min-time 0.002)
set_tests_properties(bench_sparse_smoke PROPERTIES LABELS bench TIMEOUT 120)
add_test(NAME bench_sparse_cold_smoke COMMAND ymlopt_bench_sparse --shapes 768x768 --m 1 --threads 1,2 --csr 0.9
  --min-time 0.002 --cold)
set_tests_properties(bench_sparse_cold_smoke PROPERTIES LABELS bench TIMEOUT 120)
