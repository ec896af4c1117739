// Activation-aware per-input-channel scaling of linear layers (optimizer/src/smooth.cpp):
// the pass `smooth` rewrites y = x Wᵀ as y = (x diag(s)⁻¹) (W diag(s))ᵀ, with the
// diag(s)⁻¹ folded exactly into whatever makes x — a LayerNorm's gamma and beta, or
// the output rows and bias of a linear layer with no activation or a ReLU
// (relu(z / s) = relu(z) / s for s > 0) — so the f32 model computes the same function
// and a quantizer that follows sees weights and activations whose difficulty moved.
//
//   mode=smooth (SmoothQuant, Xiao et al. 2023; for W8A8 int8):
//     s_j = max|X_j|^α / max_i |W_ij|^(1-α)
//   mode=awq (AWQ, Lin et al. 2024; for weight-only int4 groups):
//     s_j = mean|X_j|^α / sqrt(max_j' · min_j' of mean|X_j'|^α), α from a grid in [0, 1]
//     with the least Σ over the consumers of ||X (Q(W diag(s)) diag(s)⁻¹ - W)ᵀ||² on the
//     calibration inputs X (Q: the quant.group / quant.int8 round-to-nearest rule).
//
//   auto s = opt::smooth_scales(act_absmax, w_absmax, 0.5);
//   ymlopt optimize model.xml ... --passes smooth:alpha=0.5,quant.int8
//   ymlopt optimize model.xml ... --passes smooth:mode=awq:bits=4:group=128,quant.gptq:bits=4:group=128
#pragma once
#include <cstdint>
#include <vector>

namespace ymlopt::opt {

/// SmoothQuant scales: s_j = act_absmax_j^alpha / w_absmax_j^(1 - alpha); a channel
/// with act_absmax or w_absmax 0 (dead on the calibration data, or no weight) gets 1.
std::vector<double> smooth_scales(const std::vector<double>& act_absmax, const std::vector<double>& w_absmax,
                                  double alpha);

/// AWQ scales for one alpha: s_j = act_absmean_j^alpha, divided by sqrt(max s · min s)
/// over the live channels (the AWQ reference's normalisation); a dead channel
/// (act_absmean 0) gets 1.
std::vector<double> awq_scales(const std::vector<double>& act_absmean, double alpha);

/// Round-to-nearest fake quantization of w [n, k] (row-major) in place, with the
/// rules of quant.hpp: bits 8 group 0 = quant.int8 (per row), else quant.group
/// (groups of `group` along k; symmetric or asymmetric), f32 arithmetic.
void fake_quantize(std::vector<float>& w, std::int64_t n, std::int64_t k, int bits, std::int64_t group,
                   bool symmetric);

}  // namespace ymlopt::opt
