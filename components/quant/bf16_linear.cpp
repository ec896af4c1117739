#include "quant/bf16_linear.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include <ymlopt/half.hpp>
#include <ymlopt/sdk.hpp>

#include "quant/bf16_linear_internal.hpp"
#include "quant/qlinear.hpp"

namespace ymlopt::quant {

bool cpu_has_avx512_bf16() {
  static const bool has = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                          __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bf16");
  return has;
}

const char* bf16_best_isa_name() {
  return cpu_has_avx512_bf16() ? "AVX-512 BF16" : cpu_has_avx2() ? "AVX2" : "scalar";
}

namespace bf16_impl {

void to_bf16_scalar(const float* x, std::int64_t n, std::uint16_t* out) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = half::bf16_bits_from_float(x[i]);
}

void run_scalar(const Acts& a, const std::uint16_t* w, std::int64_t n, std::int64_t ldw, float* y, std::int64_t ldy) {
  for (std::int64_t i = 0; i < a.m; ++i) {
    const std::uint16_t* xr = a.q + i * a.kp;
    for (std::int64_t j = 0; j < n; ++j) {
      const std::uint16_t* wr = w + j * ldw;
      float s = 0;
      for (std::int64_t c = 0; c < a.k; ++c) s += half::bf16_bits_to_float(xr[c]) * half::bf16_bits_to_float(wr[c]);
      y[i * ldy + j] = s;
    }
  }
}

}  // namespace bf16_impl

void linear_bf16(const float* x, std::int64_t m, std::int64_t ldx, const std::uint16_t* w, std::int64_t n,
                 std::int64_t k, std::int64_t ldw, float* y, std::int64_t ldy, Bf16Isa isa) {
  using std::to_string;
  if (m < 0 || n < 0 || k < 0) throw KernelError("linear_bf16: negative dimension");
  if (m == 0 || n == 0) return;
  if (ldy < n) throw KernelError("linear_bf16: ldy " + to_string(ldy) + " < n " + to_string(n));
  if (!y) throw KernelError("linear_bf16: null output");
  if (k == 0) {
    for (std::int64_t i = 0; i < m; ++i)
      for (std::int64_t j = 0; j < n; ++j) y[i * ldy + j] = 0;
    return;
  }
  if (!x || !w) throw KernelError("linear_bf16: null input");
  if (ldx < k || ldw < k)
    throw KernelError("linear_bf16: ldx " + to_string(ldx) + " / ldw " + to_string(ldw) + " < k " + to_string(k));
  if (isa == Bf16Isa::avx512_bf16 && !cpu_has_avx512_bf16())
    throw KernelError("linear_bf16: this CPU has no AVX-512 BF16");
  if (isa == Bf16Isa::avx2 && !cpu_has_avx2()) throw KernelError("linear_bf16: this CPU has no AVX2/FMA");
  if (isa == Bf16Isa::best)
    isa = cpu_has_avx512_bf16() ? Bf16Isa::avx512_bf16 : cpu_has_avx2() ? Bf16Isa::avx2 : Bf16Isa::scalar;

  // x rounded to bf16 once per call (m·k conversions against m·n·k products)
  bf16_impl::Acts a;
  a.m = m;
  a.k = k;
  a.kp = (k + 31) / 32 * 32;
  // rows of 64-byte lines from a 64-byte boundary: no vector load splits a line
  thread_local std::vector<std::uint16_t> buf;
  buf.resize(static_cast<std::size_t>(m * a.kp + 32));
  std::uint16_t* q = buf.data() + (64 - reinterpret_cast<std::uintptr_t>(buf.data()) % 64) % 64 / 2;
  auto* convert = isa == Bf16Isa::avx512_bf16 ? bf16_impl::to_bf16_avx512
                  : isa == Bf16Isa::avx2       ? bf16_impl::to_bf16_avx2
                                               : bf16_impl::to_bf16_scalar;
  for (std::int64_t i = 0; i < m; ++i) {  // each row, then zeros to kp (the kernels read whole 32-blocks)
    convert(x + i * ldx, k, q + i * a.kp);
    std::fill(q + i * a.kp + k, q + (i + 1) * a.kp, std::uint16_t(0));
  }
  a.q = q;
  switch (isa) {
    case Bf16Isa::avx512_bf16: return bf16_impl::run_avx512(a, w, n, ldw, y, ldy);
    case Bf16Isa::avx2: return bf16_impl::run_avx2(a, w, n, ldw, y, ldy);
    default: return bf16_impl::run_scalar(a, w, n, ldw, y, ldy);
  }
}

}  // namespace ymlopt::quant
