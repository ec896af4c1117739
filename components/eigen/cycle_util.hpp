// What the restart-cycle components share (eigen.eram_cycle, eigen.iram_cycle
// and the tiled IRAM tasks eigen.iram_begin/eigen.iram_end): the Ritz pairs in
// ports `vectors` [n,k] and `values` [k,3] (dgeev style, see
// workflow_components.hpp), their parameters, and the check of a converged set.
// Internal to the family.
//
//   const eigen::EigenResult c = eigen::iram_ritz(fac, k, which, tol, &ritz_norm);
//   double worst = write_pairs(c, ritz_norm, n, k, vectors, values, residual);
//   worst = verify_pairs(ctx, op, c, worst, which, vectors, values, residual);
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "eigen/eigen.hpp"
#include <ymlopt/sdk.hpp>

namespace ymlopt::eigen_util {

/// "" when bound port i has dtype f64.
std::string f64_port(const std::vector<PortSpec>& s, std::span<const TensorView> p, std::size_t i, const char* why);

/// The parameters of the cycle components: k, subspace (its doc given), which,
/// seed, tol, verify and format.
std::vector<ParamSpec> cycle_params(const char* subspace_doc);

/// The task's arg `which` (magnitude | real).
eigen::Which which_of(const KernelContext& ctx);

/// The pairs held by the ports as arnoldi() keeps them (vectors_re/im n x k,
/// vector j at j*n), so ritz_restart_vector combines them exactly as ERAM does.
eigen::EigenResult unpack_pairs(const TensorView& vectors, const TensorView& values, std::int64_t n, std::int64_t k);

/// Writes a cycle's k pairs into the ports, dgeev style.
void pack_pairs(const eigen::EigenResult& r, std::int64_t n, std::int64_t k, const TensorView& vectors,
                const TensorView& values);

/// A cycle's outputs: the k pairs into the ports and the largest relative
/// residual (ARPACK's floor from ritz_norm) into `residual`; returns it.
double write_pairs(const eigen::EigenResult& c, double ritz_norm, std::int64_t n, std::int64_t k,
                   const TensorView& vectors, const TensorView& values, const TensorView& residual);

/// A cycle whose k pairs converged (residual `worst` <= tol) meets
/// eigen::check_wanted() when the task's verify is on: a more wanted
/// eigenvalue outside the set replaces its least wanted pair in the ports and
/// the residual port says 1, so the loop goes on from the corrected set (a check
/// that finds no such evidence, settled or inconclusive, keeps the set).
/// Reports verify_matvecs, missed and unverified (inconclusive). Returns the residual written.
double verify_pairs(KernelContext& ctx, const eigen::LinearOperator& op, const eigen::EigenResult& c, double worst,
                    eigen::Which which, const TensorView& vectors, const TensorView& values,
                    const TensorView& residual);

/// The IRAM factorisation kept in ports basis [m+1, n] (V_m a vector per
/// row, f in row m: worked on in place, so its rows must be contiguous),
/// hessenberg [m+1, m] (row-major: copied to column-major) and state [k+1, 3]
/// row 0 (started, ||A|| estimate, next random seed; all zero: not started,
/// the next random vector from `seed`). beta is ||f||.
class PortFactor {
 public:
  /// read_beta false: f is about to be replaced (a new start, an Arnoldi step), so ||f|| is not computed.
  PortFactor(const TensorView& basis, const TensorView& hess, const TensorView& state, std::uint64_t seed,
             bool read_beta = true);
  eigen::ArnoldiSpan span;
  eigen::IramState st;
  /// Writes H and state row 0 back.
  void store(const TensorView& hess, const TensorView& state) const;

 private:
  std::vector<double> H_;
};
/// Keeps the k values written in state rows 1..k.
void remember_pairs(const TensorView& values, const TensorView& state, std::int64_t k);
/// True when the pairs were not written by the last cycle (state rows 1..k
/// differ: eigen.ritz_select adopted a gathered set) or, before the first
/// cycle, non-zero vectors were given: the next cycle restarts explicitly from them.
bool pairs_given(const TensorView& vectors, const TensorView& values, const TensorView& state, std::int64_t k);

/// Throws KernelError naming the port and entry when `v` (f64) holds a value that is not finite.
void require_finite(const TensorView& v, const std::string& port);

}  // namespace ymlopt::eigen_util
