#pragma once

// One data-parallel optimizer step, split into the calls the training loop makes, so the
// loop keeps control of data loading and the model while the numerics live here:
//
//   for each of accumulation_steps micro-batches:
//     { AutocastScope scope(step.precision()); loss = criterion(model(x)); }
//     step.Backward(loss);          // backward of loss * loss_scale / accumulation_steps;
//                                   // the last micro-batch's backward starts the bucketed
//                                   // all-reduces (GradientReducer), earlier ones don't
//   outcome = step.Finish();        // wait for the all-reduces; fp16: unscale + collective
//                                   // inf/NaN check, skip + back off on overflow; clip to
//                                   // max_grad_norm; optimizer step (ZeRO: of this rank's
//                                   // shard, then all-gathers); scaler update
//
// Gradients are zeroed by the first Backward of a step, so after Finish param.grad()
// still holds the step's averaged (unscaled, clipped) gradient, except at ZeRO stage 2:
// the reducer reduce-scatters each bucket into the ZeroOptimizer's gradient shard and
// drops param.grad(); the inf/NaN check and the norm are then collective over the shards
// (grad_clip.h: ShardedClipGradNorm). Every rank takes the same
// skip decision and, as the gradients are identical after the all-reduce, computes the
// same norm and applies the same update.
//
// Not thread-safe: owned by the training loop's thread.

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/time/clock.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/device/precision.h"
#include "worker/trainer/profile/trace.h"
#include "worker/trainer/step/grad_scaler.h"
#include "worker/trainer/step/gradient_reducer.h"
#include "worker/trainer/zero/zero_optimizer.h"

namespace baton::trainer {

// Defaults: TrainerSpec's (common/spec/trainer_spec_defaults.h).
struct TrainStepOptions {
  Precision precision = Precision::kFp32;  // TrainerSpec.precision's default, "fp32".
  int64_t accumulation_steps = trainer_spec::kAccumulationSteps.default_value;  // > 0.
  // 0: no clipping (the norm is still reported).
  double max_grad_norm = trainer_spec::kMaxGradNorm.default_value;
  GradientReducerOptions reducer;
  // Loss scaling knobs; `enabled` is ignored (on exactly for fp16).
  GradScalerOptions scaler;
  // Wait for the device at phase boundaries so that the reported times are the device's
  // (CUDA kernels run asynchronously). Costs a little throughput on GPUs; no-op on CPU.
  bool synchronize_for_timing = true;
};

struct StepOutcome {
  bool skipped = false;      // fp16 overflow: no update was applied.
  double grad_norm = 0;      // Of the averaged, unscaled gradient, before clipping (NaN
                             // when skipped).
  double loss_scale = 1;     // Scale used for this step's backward.
  absl::Duration comm_wait;  // Finishing and waiting for the all-reduces.
  absl::Duration optimizer;  // Unscale/check, clip, optimizer step, scaler update.
};

class TrainStep {
 public:
  // `params`: the trainable parameters in model order, on comm.device(), the ones
  // `optimizer` updates. `zero` (ZeRO stage 1 or 2; may be null): when set, the update is
  // zero->Step() (this rank's shard, then the all-gathers) instead of optimizer.step(), and
  // `optimizer` must be zero's reference optimizer (it still zeroes the gradients). At
  // stage 2 zero's segments must be the reducer's buckets (GradientBuckets(params,
  // options.reducer.bucket_cap_mb)): INVALID_ARGUMENT otherwise, or with compression.
  // `optimizer`, `comm`, `clock` and `zero` must outlive the TrainStep. INVALID_ARGUMENT for
  // bad options or parameters (see GradientReducer::Create).
  static absl::StatusOr<std::unique_ptr<TrainStep>> Create(std::vector<at::Tensor> params,
                                                           torch::optim::Optimizer& optimizer,
                                                           Communicator& comm, const Clock& clock,
                                                           const TrainStepOptions& options,
                                                           ZeroOptimizer* zero = nullptr);

  const PrecisionPlan& precision() const { return plan_; }
  const GradScaler& scaler() const { return scaler_; }
  GradScaler& mutable_scaler() { return scaler_; }
  const GradientReducer& reducer() const { return *reducer_; }
  int64_t accumulation_steps() const { return options_.accumulation_steps; }
  // Step profiling: GradientReducer::SetTrace.
  void SetTrace(TraceRecorder* recorder, const Clock* clock, int64_t step) {
    reducer_->SetTrace(recorder, clock, step);
  }

  // Backward of one micro-batch's mean loss. FAILED_PRECONDITION after accumulation_steps
  // calls without Finish; INTERNAL for LibTorch errors.
  absl::Status Backward(const at::Tensor& loss);

  // Completes the step after accumulation_steps Backward calls (FAILED_PRECONDITION
  // otherwise). UNAVAILABLE when a collective failed; INTERNAL for LibTorch errors.
  // `exchanged`, if set, runs once the gradients' exchange completed, before the update:
  // what must hold for every step that completed anywhere (the sample log) goes there, since
  // a rank can die between the exchange and the end of Finish.
  absl::StatusOr<StepOutcome> Finish(const std::function<void()>& exchanged = nullptr);

 private:
  TrainStep(std::vector<at::Tensor> params, torch::optim::Optimizer& optimizer, Communicator& comm,
            const Clock& clock, const TrainStepOptions& options,
            std::unique_ptr<GradientReducer> reducer, ZeroOptimizer* zero);

  const std::vector<at::Tensor> params_;
  torch::optim::Optimizer& optimizer_;
  ZeroOptimizer* const zero_;  // Null: optimizer_ updates all the parameters.
  Communicator& comm_;
  const Clock& clock_;
  const TrainStepOptions options_;
  const PrecisionPlan plan_;
  std::unique_ptr<GradientReducer> reducer_;
  GradScaler scaler_;
  int64_t micro_ = 0;  // Backward calls in the current step.
};

}  // namespace baton::trainer
