# Quantized linear benchmark (components/quant): see docs/BENCHMARKS.md.
ymlopt_add_bench(ymlopt_bench_qlinear ${CMAKE_CURRENT_LIST_DIR}/bench_qlinear.cpp ymlopt::quant ymlopt::gemm PkgConfig::OPENBLAS)
add_test(NAME bench_qlinear_smoke COMMAND ymlopt_bench_qlinear --m 1,5 --shapes 128x48,256x40 --threads 1,2 --reps 1)
set_tests_properties(bench_qlinear_smoke PROPERTIES LABELS bench TIMEOUT 120)
