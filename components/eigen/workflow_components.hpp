// Eigen components meant as workflow building blocks (register_eigen_workflow,
// called by register_eigen):
//
//   eigen.eram_cycle     ONE explicit restart cycle of ERAM (arnoldi_cycle of eigen.hpp)
//                        on inout Ritz vectors/values, so a restarted Arnoldi, or a MERAM
//                        co-method exchanging Ritz pairs by publish/gather, is an
//                        <until> loop in XML around one task.
//   eigen.iram_cycle     ONE cycle of IRAM (iram_cycle of eigen.hpp) on the same pairs
//                        plus its factorisation kept in three inout tensors, so a MIRAM
//                        co-method is an <until> loop too (workflows/unite/meram.xml,
//                        implicit=true).
//   eigen.generate       a test matrix A [n,n] from generators.hpp (prescribed
//                        spectrum in a disc or box, convection-diffusion, Markov walk).
//   eigen.matrix_market  a Matrix Market file (matrix_market.hpp) as A [r,c], dense or CSR.
//
// Every component here (and in components.cpp) takes arg format=csr for a matrix
// kept sparse: port a then holds the values [cap], a_index their columns and
// a_ptr the row pointers (operator_ports.hpp); eigen.generate and
// eigen.matrix_market write the three that way.
//
// eigen.eram_cycle ports (n from port a, k from arg k):
//   a         in     A [n,n], f32 or f64 (f32 is copied to double)
//   vectors   inout  [n,k] f64: the current Ritz vectors, LAPACK dgeev style: a real
//                    value's column is its unit vector; a conjugate pair listed in rows
//                    j (+im) and j+1 (-im) of `values` has x = col j + i col j+1 (and its
//                    conjugate). A +im value whose partner does not fit (j = k-1) keeps
//                    col j = Re x + Im x = Re((1-i) x), the real vector a restart adds.
//   values    inout  [k,3] f64: rows (re, im, residual estimate ||A x - θ x|| for unit x),
//                    in wanted order (largest |θ| or Re θ first, +im before -im)
//   residual  out    [1] f64: max_j |r_j| / max(|θ_j|, eps^(2/3) ||H||), ||H|| the largest
//                    |θ| of all m Ritz values: eigen.arnoldi converges when this <= tol.
// On input, all-zero `vectors` (the zeros init) start from the random unit vector of
// arg seed; anything else restarts from the residual-weighted sum of the given pairs
// (ritz_restart_vector: exactly ERAM's restart, so an <until> loop of cycles is
// eigen.arnoldi with the same subspace and seed, cycle for cycle). `values` all zero with
// non-zero vectors: the plain sum of the columns. Reports matvecs (= m), residual,
// restarts (0: fresh start, 1: restarted from given pairs).
//
//   <data name="v" dtype="f64" shape="[400,4]" init="zeros"/>
//   <data name="vals" dtype="f64" shape="[4,3]" init="zeros"/>
//   <data name="res" dtype="f64" shape="[1]" init="zeros"/>
//   <until cond="res le 1e-8" max="500">
//     <task component="eigen.eram_cycle"> <in port="a" data="A"/> <inout port="vectors" data="v"/>
//       <inout port="values" data="vals"/> <out port="residual" data="res"/>
//       <arg name="k" value="4"/> <arg name="subspace" value="10"/> </task>
//   </until>
//
// eigen.iram_cycle: the ports of eigen.eram_cycle, then (m = subspace)
//   basis       inout  [m+1, n] f64: V_m, a vector per row, and the residual vector f in row m
//   hessenberg  inout  [m+1, m] f64: H_m
//   state       inout  [k+1, 3] f64: row 0 (started, ||A|| estimate, next random seed),
//                      rows 1..k the values the cycle last wrote
// All zero (the zeros init): the first cycle factorises from the random vector of
// arg seed (m matvecs). Then each cycle restarts implicitly (exact shifts, k' as
// eigen.arnoldi restart=implicit: m - k' matvecs), so the loop is eigen.arnoldi
// restart=implicit cycle for cycle; if `values` no longer hold what it wrote (an
// eigen.ritz_select adopted a gathered set) it restarts explicitly from the pairs
// (m matvecs), as MIRAM does. Reports matvecs, restarts, explicit (0/1), residual.
#pragma once

#include <complex>
#include <string>
#include <vector>

#include "eigen/eigen.hpp"

namespace ymlopt {
/// Registers eigen.eram_cycle, eigen.iram_cycle, eigen.ritz_select, eigen.generate and eigen.matrix_market.
void register_eigen_workflow(Registry& reg);
}  // namespace ymlopt

namespace ymlopt::eigen {

/// Parses a spectrum list as eigen.generate's arg `top` takes it: comma-separated
/// items "a" (real) or "a+bi" (the pair a ± bi, given once, b > 0); spaces allowed.
/// Throws KernelError naming the bad item.
///
///   parse_spectrum("3, 2.6+0.5i, 2.2")  // {3, 2.6+0.5i, 2.2}: 4 dimensions
std::vector<std::complex<double>> parse_spectrum(const std::string& text);

}  // namespace ymlopt::eigen
