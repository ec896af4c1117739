// Eigen components for an operator cut into row blocks whose products run as
// tasks (register_eigen_tiled, called by register_eigen): the matvec of a
// Krylov method spreads over the workers, and under StarPU-MPI over the ranks
// that own the blocks (workflows/unite/miram_tiled.xml).
//
//   eigen.csr_block      row block b of a CSR matrix (a, a_index, a_ptr) as one tile of a
//                        blocked CSR: block [1, bcap] f64 values, block_index [1, bcap] i32
//                        global columns, block_ptr [1, rows+1] i32 local row pointers. The
//                        blocked tensors are [blocks, bcap] and [blocks, rows+1] with
//                        tile="1,bcap" / "1,rows+1": a row block is a tile StarPU places and
//                        moves, and a rank owns.
//   eigen.block_matvec   y = A_b x for one row block: a, a_index, a_ptr the block's tiles,
//                        x [1, n] whole, y [1, r] a tile of the product.
//
// An IRAM cycle (eigen::iram_cycle's operations, so a loop of these cycles gives
// eigen.iram_cycle's numbers) whose m products are eigen.block_matvec tasks:
//
//   eigen.iram_begin     a new factorisation when there is none or the pairs were
//                        adopted (explicit restart); else nothing
//   per column j:        eigen.block_matvec per row block (x -> tiles of w, skipped
//                        for j < cursor), then eigen.arnoldi_step j (w orthogonalised
//                        into the basis, the next column into x)
//   eigen.iram_end       the Ritz pairs and residual (eigen.iram_cycle's ports), the
//                        check of a converged set (verify: the whole operator in
//                        ports a, a_index, a_ptr), the implicit restart
//
// The factorisation is kept as eigen.iram_cycle keeps it (basis [m+1, n],
// hessenberg [m+1, m], state [k+1, 3]) plus cursor [1] (the next column to
// extend) and x [1, n] (the vector the next products take).
#pragma once

#include <ymlopt/sdk.hpp>

namespace ymlopt {
/// Registers eigen.csr_block, eigen.block_matvec, eigen.iram_begin, eigen.arnoldi_step and eigen.iram_end.
void register_eigen_tiled(Registry& reg);
}  // namespace ymlopt
