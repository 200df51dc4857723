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

namespace baton::trainer {

// The L2 norm of all defined gradients of `params` taken together (0 when none). One
// device-to-host copy.
double GradNorm(const std::vector<at::Tensor>& params);

// Scales the gradients so their global L2 norm is at most max_norm (> 0) and returns the
// norm before clipping. A non-finite norm multiplies the gradients by NaN, as LibTorch does.
double ClipGradNorm(const std::vector<at::Tensor>& params, double max_norm);

}  // namespace baton::trainer
