#pragma once

// Dynamic loss scaling for float16 training, with the semantics of PyTorch's
// torch.cuda.amp.GradScaler, made collective:
//
//   - the loss is multiplied by scale() before backward();
//   - after the gradients were averaged over ranks, UnscaleAndCheck divides them by
//     scale() and decides whether ANY rank's gradients hold an inf or NaN: each rank's
//     flag is summed with one all-reduce, so every rank takes the same decision even if
//     the non-finite value appeared on one rank only after averaging;
//   - a step with non-finite gradients is skipped (the caller does not call the optimizer)
//     and Update(true) multiplies the scale by backoff_factor (0.5);
//   - after growth_interval consecutive clean steps Update(false) multiplies it by
//     growth_factor (2).
//
// When disabled (fp32/bf16), Scale is the identity, UnscaleAndCheck neither scales nor
// communicates and reports no overflow, and scale() is 1.
//
// Not thread-safe: owned by the training loop's thread.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/comm/communicator.h"

namespace baton::trainer {

struct GradScalerOptions {
  bool enabled = false;
  double init_scale = 65536.0;  // 2^16.
  double growth_factor = 2.0;
  double backoff_factor = 0.5;
  int64_t growth_interval = 2000;  // Clean steps before the scale grows; > 0.
};

class GradScaler {
 public:
  explicit GradScaler(const GradScalerOptions& options);

  bool enabled() const { return options_.enabled; }
  // The current scale (1 when disabled).
  double scale() const { return enabled() ? scale_ : 1.0; }
  // Consecutive clean steps since the last growth or backoff.
  int64_t growth_tracker() const { return growth_tracker_; }

  // Checkpoint restore. INVALID_ARGUMENT for a non-positive or non-finite scale or a
  // negative tracker.
  absl::Status Restore(double scale, int64_t growth_tracker);

  // loss * scale() (the loss itself when disabled).
  at::Tensor Scale(const at::Tensor& loss) const;

  // Divides the defined gradients of `params` by scale() in place and returns true when
  // some rank's gradients hold an inf/NaN (the step must be skipped). Collective (one
  // all-reduce of a flag on comm.device()) when enabled. Errors from the collective.
  absl::StatusOr<bool> UnscaleAndCheck(const std::vector<at::Tensor>& params,
                                       Communicator& comm);

  // Adjusts the scale after a step (see the header comment). No-op when disabled.
  void Update(bool found_inf);

 private:
  GradScalerOptions options_;
  double scale_;
  int64_t growth_tracker_ = 0;
};

}  // namespace baton::trainer
