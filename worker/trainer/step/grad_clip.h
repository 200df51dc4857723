#pragma once

// Global gradient norm and clipping, with torch::nn::utils::clip_grad_norm_'s semantics
// (L2 norm over all defined gradients; coefficient max_norm / (norm + 1e-6), clamped to
// at most 1, multiplied into every gradient).
//
// In data-parallel training this runs after the averaging all-reduce, when every rank
// holds identical gradients: the local norm IS the global norm of the averaged gradient,
// identical on every rank, so no further communication is needed and every rank clips by
// the same coefficient.

#include <ATen/core/Tensor.h>

#include <vector>

#include "absl/status/statusor.h"
#include "worker/trainer/comm/communicator.h"

namespace baton::trainer {

// The L2 norm of all defined gradients of `params` taken together (0 when none). One
// device-to-host copy.
double GradNorm(const std::vector<at::Tensor>& params);

// Scales the gradients so their global L2 norm is at most max_norm (> 0) and returns the
// norm before clipping. A non-finite norm multiplies the gradients by NaN, as LibTorch does.
double ClipGradNorm(const std::vector<at::Tensor>& params, double max_norm);

// The same for a gradient sharded over the ranks (ZeRO stage 2): `shards` hold this rank's
// part of the averaged gradient (their grad()s, the parts disjoint across ranks, padding
// zeros). The global norm is the square root of the all-reduced sum of the ranks' squared
// norms (in float64; one scalar all-reduce, so every rank gets the same norm and clips by
// the same coefficient). It equals the unsharded norm up to rounding: the additions are
// grouped differently. max_norm 0: no clipping, the norm is still returned. Errors from
// the collective.
absl::StatusOr<double> ShardedClipGradNorm(const std::vector<at::Tensor>& shards, double max_norm,
                                           Communicator& comm);

}  // namespace baton::trainer
