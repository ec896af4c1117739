# Prune family (OBS, low rank, layer-wise refit) on transformer-sized layers, timed
# against the layer's own forward sgemm; see the header of bench_prune.cpp.
add_executable(ymlopt_bench_prune ${CMAKE_CURRENT_LIST_DIR}/bench_prune.cpp)
target_link_libraries(ymlopt_bench_prune PRIVATE ymlopt::prune PkgConfig::OPENBLAS PkgConfig::LAPACKE)
add_test(NAME bench_prune_smoke COMMAND ymlopt_bench_prune --shapes 64x48,32x96 --m 256 --reps 1)
set_tests_properties(bench_prune_smoke PROPERTIES LABELS bench TIMEOUT 120)
