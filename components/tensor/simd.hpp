// The widest x86 vector instruction set for a kernel's plain C++ loops. The
// build targets baseline x86-64 (SSE2: 4 float lanes) so that the binary runs
// on any x86-64; run_widest compiles the loops it is given twice more, for
// AVX-512 (16 lanes) and for AVX2 + FMA (8 lanes), and picks the widest copy
// the CPU runs. `flatten` inlines the loop body (and what it calls: vexp, the
// activations) into those copies, so the compiler vectorizes it there with the
// wider registers.
//
//   kutil::run_widest([&] { for (int64_t j = 0; j < n; ++j) y[j] = act(y[j] + b[j]); });
//
// Intrinsic kernels (quant::, sparse::) dispatch on their own; this is for
// loops the compiler vectorizes by itself.
#pragma once

#include <atomic>

namespace ymlopt::kutil {

/// Test hook: while false, run_widest runs the loops as built (baseline x86-64), so
/// that a test can compare both copies on one machine (ScopedBaselineLoops).
inline std::atomic<bool>& widest_loops_enabled() {
  static std::atomic<bool> on{true};
  return on;
}

#if defined(__x86_64__) && defined(__GNUC__)
/// Does the CPU run AVX-512 F and DQ (tested once)?
inline bool has_avx512() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512dq");
  return has;
}

/// Does the CPU run AVX2 and FMA (tested once)?
inline bool has_avx2() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

template <class F>
__attribute__((target("avx512f,avx512dq,avx2,fma"), flatten)) void run_avx512(F& f) {
  f();
}

template <class F>
__attribute__((target("avx2,fma"), flatten)) void run_avx2(F& f) {
  f();
}

/// Runs f() compiled for AVX-512 when the CPU has it, else for AVX2, else as built.
template <class F>
void run_widest(F&& f) {
  if (!widest_loops_enabled().load(std::memory_order_relaxed))
    f();
  else if (has_avx512())
    run_avx512(f);
  else if (has_avx2())
    run_avx2(f);
  else
    f();
}
#else
template <class F>
void run_widest(F&& f) {
  f();
}
#endif

/// Runs run_widest's loops as built while in scope (tests).
class ScopedBaselineLoops {
 public:
  ScopedBaselineLoops() : was_(widest_loops_enabled().exchange(false)) {}
  ~ScopedBaselineLoops() { widest_loops_enabled().store(was_); }
  ScopedBaselineLoops(const ScopedBaselineLoops&) = delete;
  ScopedBaselineLoops& operator=(const ScopedBaselineLoops&) = delete;

 private:
  bool was_;
};

}  // namespace ymlopt::kutil
