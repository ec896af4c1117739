// The weight representations nn.linear accepts beside dense f32/f64, and the
// product y = x · Wᵀ for each (W [n, k], rows are output features):
//
//   format  ports                                              kernel
//   int8    w i8 [n,k], w_scale f32|f16 [n] or [n,k/group],    quant::linear (VNNI, activations
//           w_zero f32|f16 (asymmetric, optional)              quantized per token)
//   int4    w i8 [n,k/2] (two codes per byte), w_scale, w_zero quant::linear
//   csr     w f32 [nnz], w_index i32 [nnz], w_ptr i32 [n+1]    sparse::linear (CSR x dense)
//   bsr     w f32 [nblocks, bs*bs], w_index i32 [nblocks],     sparse::linear (block micro-GEMMs)
//           w_ptr i32 [n/bs+1], arg block=bs
//   nm24    w f32 [n,k/2], w_index i8 [n,k/8]                  sparse::linear (2:4 gather)
//   bf16    w bf16 [n,k]                                       quant::linear_bf16 (x rounded to bf16,
//                                                              f32 sums; AVX-512 BF16, AVX2)
//
//   <task component="nn.linear">
//     <in port="x" data="x"/><in port="w" data="fc.q"/><in port="w_scale" data="fc.scale"/>
//     <out port="y" data="y"/><arg name="format" value="int8"/>
//   </task>
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>
#include <ymlopt/content_cache.hpp>
#include <ymlopt/sdk.hpp>

namespace ymlopt::nn {

enum class WeightFormat : std::uint8_t { dense, int8, int4, csr, bsr, nm24, bf16 };

std::optional<WeightFormat> parse_weight_format(std::string_view s);
const char* weight_format_name(WeightFormat f);

/// nn.linear's port indices.
enum LinearPort : std::size_t { kX, kW, kB, kY, kR, kWScale, kWZero, kWIndex, kWPtr, kNumLinearPorts };

/// "" when the compressed weight ports describe a W [n, k] of format f.
std::string check_compressed_weight(const std::vector<PortSpec>& specs, std::span<const TensorView> p,
                                    const Args& a, WeightFormat f, std::int64_t n, std::int64_t k);

/// Multiply-adds of the compressed product for m rows of x (nonzeros for sparse formats
/// are only known at run time: the estimate uses the stored value count).
double compressed_flops(std::span<const TensorView> p, WeightFormat f, std::int64_t m, std::int64_t n,
                        std::int64_t k);

/// y[m, n] = x[m, k] · Wᵀ (f32), overwriting y. Validates the index arrays
/// (monotone row pointers, columns in range) and throws KernelError on a lie.
/// CSR with m < 8 (sparse::kCsrPlanMaxM) and all three arrays named (TensorView::content_id) runs on a
/// GEMV plan (sparse::plan_gemv) kept for those contents, within
/// YMLOPT_SPARSE_PLAN_CACHE_MB (default 256, 0 = none); the arrays are then
/// validated once, when the plan is built.
void compressed_product(std::span<const TensorView> p, const Args& a, WeightFormat f, const float* x,
                        std::int64_t m, std::int64_t ldx, float* y, std::int64_t ldy);

/// Whether a CSR product of m tokens keeps a GEMV plan (for named arrays), and
/// the plan cache's counters.
bool keeps_csr_plan(std::int64_t m);
ContentCacheStats csr_plan_cache_stats();
/// What runs CSR products of fewer than 8 tokens, as `ymlopt info` prints it:
/// "GEMV plans kept per weight (cache 256 MiB)", or that plans are off.
std::string csr_gemv_description();

}  // namespace ymlopt::nn
