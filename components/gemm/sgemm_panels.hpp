// f32 GEMM with the right operand packed once into column panels.
//
// C[m, n] = alpha op(A) op(B) + beta C (row-major), where op(B) [k, n] has been
// packed by pack_panels() into panels of kPanelCols output columns, k-major
// (a panel holds B's columns j0..j0+31 as k rows of 32 floats, zeros past n).
// A model's weights are packed once and reused by every task and every run
// that reads them (gemm::gemm with OperandIds keeps them, sgemm_panels.cpp);
// the kernel reads a panel row with two (AVX-512) or four (AVX2) vector loads
// and broadcasts the activations, packed per call in blocks of kKBlock.
//
//   std::vector<float> p(gemm::panel_floats(n, k));
//   gemm::pack_panels(w, /*b_trans=*/true, n, k, ldw, p.data());   // w is [n, k]
//   gemm::sgemm_panels(false, m, n, k, 1.0f, x, ldx, p.data(), 0.0f, y, ldy);
#pragma once

#include <cstdint>

namespace ymlopt::gemm {

constexpr std::int64_t kPanelCols = 32;

/// Which instruction set runs sgemm_panels: best is the widest this CPU has.
enum class SgemmIsa { best, avx512, avx2, scalar };
/// "AVX-512", "AVX2" or "scalar": what best means on this CPU.
const char* sgemm_panels_isa_name();

/// Floats of the panels of a k x n operand (n rounded up to kPanelCols).
std::int64_t panel_floats(std::int64_t n, std::int64_t k);

/// Packs op(B) [k, n] into `out` (panel_floats(n, k) floats, 64-byte aligned
/// for the vector paths): b_trans means B is stored [n, k] (a weight W, rows
/// are output features), otherwise [k, n]; ldb is its row stride.
void pack_panels(const float* b, bool b_trans, std::int64_t n, std::int64_t k, std::int64_t ldb, float* out);

/// C = alpha op(A) Bp + beta C with Bp from pack_panels (beta == 0 writes C
/// without reading it). Throws KernelError on bad dimensions, or for an ISA
/// this CPU lacks.
void sgemm_panels(bool a_trans, std::int64_t m, std::int64_t n, std::int64_t k, float alpha, const float* a,
                  std::int64_t lda, const float* panels, float beta, float* c, std::int64_t ldc,
                  SgemmIsa isa = SgemmIsa::best);

}  // namespace ymlopt::gemm
