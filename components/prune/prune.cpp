#include "prune/prune.hpp"

namespace ymlopt {
void register_prune(Registry& reg) {
  register_prune_unstructured(reg);
  register_prune_obs(reg);
  register_prune_lowrank(reg);
  register_prune_structured(reg);
  register_distill(reg);
}
}  // namespace ymlopt
