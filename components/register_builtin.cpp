#include "register_builtin.hpp"

#include "blas/blas.hpp"
#include "eigen/eigen.hpp"
#include "io/io_components.hpp"
#include "nn/nn.hpp"
#include "op/op.hpp"
#include "prune/prune.hpp"
#include "quant/quant.hpp"
#include "sparse/sparse.hpp"
#include "tensor/tensor.hpp"

namespace ymlopt {
void register_builtin_components(Registry& reg) {
  register_blas(reg);
  register_tensor(reg);
  register_nn(reg);
  register_io(reg);
  register_quant(reg);
  register_sparse(reg);
  register_prune(reg);
  register_eigen(reg);
  register_op(reg);
}
}  // namespace ymlopt
