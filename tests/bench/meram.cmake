# MERAM vs ERAM vs ARPACK IRAM (docs/BENCHMARKS.md, "MERAM"). Needs no engine.
add_executable(ymlopt_bench_meram ${CMAKE_CURRENT_LIST_DIR}/bench_meram.cpp)
target_link_libraries(ymlopt_bench_meram PRIVATE ymlopt::eigen PkgConfig::OPENBLAS PkgConfig::LAPACKE PkgConfig::ARPACK)
add_test(NAME bench_meram_smoke COMMAND ymlopt_bench_meram --n 300 --cd 10 --markov 12 --reps 1 --max-restarts 3000)
set_tests_properties(bench_meram_smoke PROPERTIES LABELS bench TIMEOUT 120)
