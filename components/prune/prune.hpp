// Pruning and distillation components (CPU), registered by register_prune:
//   unstructured.cpp  prune.magnitude, prune.nm
//   obs.cpp           prune.hessian, prune.obs (SparseGPT-style layer-wise reconstruction)
//   lowrank.cpp       prune.lowrank (truncated SVD to a factor pair)
//   structured.cpp    prune.heads, prune.neurons (scores, keep masks, physical shrinking)
//   distill.cpp       distill.layerwise (closed-form least-squares refit)
#pragma once
#include <ymlopt/sdk.hpp>

namespace ymlopt {
/// Registers every prune.* and distill.* component.
void register_prune(Registry& reg);
void register_prune_unstructured(Registry& reg);
void register_prune_obs(Registry& reg);
void register_prune_lowrank(Registry& reg);
void register_prune_structured(Registry& reg);
void register_distill(Registry& reg);
}  // namespace ymlopt
