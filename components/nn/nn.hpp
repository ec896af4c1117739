// Built-in neural-network components (f32 and f64), x(in) -> y(out) of the same shape:
//   nn.relu     y = max(x, 0)
//   nn.gelu     tanh approximation (approximate="tanh", default) or exact erf form ("none")
//   nn.silu     y = x * sigmoid(x)
//   nn.softmax  row-wise, numerically stable (the row max is subtracted)
// y may be bound to the same data as x (element-wise, row by row).
// Transformer building blocks (transformer*.cpp, registered by register_nn):
//   nn.embedding, nn.layernorm, nn.rmsnorm, nn.linear, nn.attention, nn.rope,
//   nn.sinusoidal_positions, nn.swiglu, nn.tanh, nn.l2normalize, nn.pool
#pragma once
#include <ymlopt/sdk.hpp>

namespace ymlopt {
/// Registers the nn.* components.
void register_nn(Registry& reg);
/// Registers the transformer building blocks (called by register_nn).
void register_transformer(Registry& reg);
}  // namespace ymlopt
