# Semiring products (components/op) vs a plain loop, the FMA peak and the GEMM; see docs/BENCHMARKS.md.
add_executable(ymlopt_bench_semiring ${CMAKE_CURRENT_LIST_DIR}/bench_semiring.cpp)
target_link_libraries(ymlopt_bench_semiring PRIVATE ymlopt::op ymlopt::gemm)
add_test(NAME bench_semiring_smoke COMMAND ymlopt_bench_semiring --n 96 --reps 1)
set_tests_properties(bench_semiring_smoke PROPERTIES LABELS bench TIMEOUT 120)
# A GCN layer (workflows/ops/gcn.xml) against SciPy's and torch's CSR products; skips (77) without them.
if(TARGET ymlopt)
  find_program(BASH bash REQUIRED)
  add_test(NAME bench_gcn_smoke COMMAND ${BASH} ${CMAKE_CURRENT_LIST_DIR}/gcn.sh $<TARGET_FILE:ymlopt> 3000 16 2 2
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(bench_gcn_smoke PROPERTIES LABELS bench TIMEOUT 120 SKIP_RETURN_CODE 77)
endif()
