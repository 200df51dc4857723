#include "worker/trainer/step/train_step.h"

#include <ATen/ATen.h>

#include <cmath>
#include <exception>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/trainer/device/device.h"
#include "worker/trainer/step/grad_clip.h"

namespace baton::trainer {
namespace {

GradScalerOptions ScalerFor(const TrainStepOptions& options, const PrecisionPlan& plan) {
  GradScalerOptions scaler = options.scaler;
  scaler.enabled = plan.loss_scaling;
  return scaler;
}

}  // namespace

TrainStep::TrainStep(std::vector<at::Tensor> params, torch::optim::Optimizer& optimizer,
                     Communicator& comm, const Clock& clock, const TrainStepOptions& options,
                     std::unique_ptr<GradientReducer> reducer, ZeroOptimizer* zero)
    : params_(std::move(params)),
      optimizer_(optimizer),
      zero_(zero),
      comm_(comm),
      clock_(clock),
      options_(options),
      plan_(PlanPrecision(options.precision, comm.device().type())),
      reducer_(std::move(reducer)),
      scaler_(ScalerFor(options, plan_)) {}

absl::StatusOr<std::unique_ptr<TrainStep>> TrainStep::Create(std::vector<at::Tensor> params,
                                                             torch::optim::Optimizer& optimizer,
                                                             Communicator& comm, const Clock& clock,
                                                             const TrainStepOptions& options,
                                                             ZeroOptimizer* zero) {
  if (options.accumulation_steps < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--accumulation_steps=", options.accumulation_steps, " must be >= 1"));
  }
  if (!(options.max_grad_norm >= 0) || !std::isfinite(options.max_grad_norm)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_grad_norm=", options.max_grad_norm, " must be >= 0"));
  }
  if (options.scaler.growth_interval < 1 || !(options.scaler.init_scale > 0)) {
    return absl::InvalidArgumentError("loss scaler: growth_interval and init_scale must be > 0");
  }
  GradientReducerOptions reducer_options = options.reducer;
  // ZeRO points the gradients at its own flat buffer (stage 1) or drops them (stage 2).
  if (zero != nullptr) reducer_options.gradient_as_bucket_view = false;
  absl::StatusOr<std::unique_ptr<GradientReducer>> reducer =
      GradientReducer::Create(params, comm, reducer_options);
  if (!reducer.ok()) return reducer.status();
  if (zero != nullptr && zero->stage() == 2) {
    if (zero->segments() != (*reducer)->buckets()) {
      return absl::InvalidArgumentError(
          "zero stage 2: the optimizer's segments are not the gradient buckets (build it with "
          "GradientBuckets(params, bucket_cap_mb))");
    }
    if (absl::Status s = (*reducer)->ReduceScatterInto(zero->GradientShards()); !s.ok()) return s;
  }
  return std::unique_ptr<TrainStep>(
      new TrainStep(std::move(params), optimizer, comm, clock, options, *std::move(reducer), zero));
}

absl::Status TrainStep::Backward(const at::Tensor& loss) {
  if (micro_ >= options_.accumulation_steps) {
    return absl::FailedPreconditionError(
        absl::StrCat("Backward called ", micro_ + 1, " times in a step of ",
                     options_.accumulation_steps, " micro-batches"));
  }
  try {
    if (micro_ == 0) optimizer_.zero_grad();
    const bool last = micro_ + 1 == options_.accumulation_steps;
    reducer_->BeginBackward(/*sync=*/last);
    at::Tensor scaled = scaler_.Scale(loss);
    if (options_.accumulation_steps > 1) scaled = scaled / options_.accumulation_steps;
    scaled.backward();
    ++micro_;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("backward: ", e.what()));
  }
  return absl::OkStatus();
}

absl::StatusOr<StepOutcome> TrainStep::Finish(const std::function<void()>& exchanged) {
  if (micro_ != options_.accumulation_steps) {
    return absl::FailedPreconditionError(absl::StrCat(
        "Finish after ", micro_, " of ", options_.accumulation_steps, " micro-batches"));
  }
  micro_ = 0;
  const c10::Device device = comm_.device();
  auto sync = [&] {
    if (options_.synchronize_for_timing) SynchronizeDevice(device);
  };
  StepOutcome outcome;
  outcome.loss_scale = scaler_.scale();

  const absl::Time comm_start = clock_.Now();
  if (absl::Status s = reducer_->FinishBackward(); !s.ok()) return s;
  if (exchanged) exchanged();
  sync();
  const absl::Time optimizer_start = clock_.Now();
  outcome.comm_wait = optimizer_start - comm_start;

  // Stage 2: only this rank's shard of the gradient exists; the checks and the norm are
  // collective over the shards.
  const bool sharded = zero_ != nullptr && zero_->stage() == 2;
  const std::vector<at::Tensor> grad_owners =
      sharded ? std::vector<at::Tensor>{zero_->gradient_shard_leaf()} : params_;
  absl::StatusOr<bool> found_inf = scaler_.UnscaleAndCheck(grad_owners, comm_);
  if (!found_inf.ok()) return found_inf.status();
  try {
    if (*found_inf) {
      outcome.skipped = true;
      outcome.grad_norm = std::numeric_limits<double>::quiet_NaN();
    } else {
      if (sharded) {
        absl::StatusOr<double> norm =
            ShardedClipGradNorm(grad_owners, options_.max_grad_norm, comm_);
        if (!norm.ok()) return norm.status();
        outcome.grad_norm = *norm;
      } else {
        outcome.grad_norm = options_.max_grad_norm > 0
                                ? ClipGradNorm(params_, options_.max_grad_norm)
                                : GradNorm(params_);
      }
      if (zero_ != nullptr) {
        if (absl::Status s = zero_->Step(); !s.ok()) return s;
      } else {
        optimizer_.step();
      }
    }
    scaler_.Update(*found_inf);
    sync();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("optimizer step: ", e.what()));
  }
  outcome.optimizer = clock_.Now() - optimizer_start;
  return outcome;
}

}  // namespace baton::trainer
