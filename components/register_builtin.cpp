#include "register_builtin.hpp"

#include "blas/blas.hpp"
#include "io/io_components.hpp"
#include "nn/nn.hpp"
#include "tensor/tensor.hpp"

namespace ymlopt {
void register_builtin_components(Registry& reg) {
  register_blas(reg);
  register_tensor(reg);
  register_nn(reg);
  register_io(reg);
}
}  // namespace ymlopt
