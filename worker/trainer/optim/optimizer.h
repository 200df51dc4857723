#pragma once

// Builds the trainer's optimizer from the TrainerSpec optimisation fields.
//
//   "sgd":   torch::optim::SGD. PyTorch's update: g += weight_decay * p (L2, coupled);
//            with momentum m > 0: buf = g on the first step, else buf = m * buf + g;
//            g = nesterov ? g + m * buf : buf; p -= lr * g. Dampening is always 0.
//   "adamw": torch::optim::AdamW (LibTorch 1.13 ships it, torch/optim/adamw.h), the
//            update of PyTorch's torch.optim.AdamW (amsgrad off): p *= 1 - lr * wd
//            (decoupled), m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2,
//            p -= lr / (1 - b1^t) * m / (sqrt(v) / sqrt(1 - b2^t) + eps).
//
// The optimizer keeps one parameter group; its lr is changed per step with
// SetLearningRate (driven by LrSchedule). Optimizer state (momentum buffers, Adam moments
// and step counts) round-trips through Optimizer::save/load, which CheckpointManager uses;
// LibTorch matches saved state to parameters by position, so a restored optimizer must be
// built over the same parameters in the same order.
//
// No exceptions escape: LibTorch errors become absl::Status. Not thread-safe (the
// optimizer belongs to the training loop's thread).

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/trainer_spec_defaults.h"

namespace baton::trainer {

// The TrainerSpec optimisation fields; defaults and allowed values:
// common/spec/trainer_spec_defaults.h.
struct OptimizerOptions {
  // "sgd" or "adamw" (TrainerSpec.optimizer; "" means "sgd").
  std::string name = std::string(trainer_spec::kOptimizer.default_value);
  // > 0. The initial lr; the schedule overrides it per step.
  double lr = trainer_spec::kLr.default_value;
  double momentum = trainer_spec::kMomentum.default_value;  // sgd: in [0, 1).
  bool nesterov = trainer_spec::kNesterov.default_value;    // sgd: requires momentum > 0.
  // >= 0. sgd: L2 added to the gradient; adamw: decoupled.
  double weight_decay = trainer_spec::kWeightDecay.default_value;
  double adam_beta1 = trainer_spec::kAdamBeta1.default_value;  // adamw: in [0, 1).
  double adam_beta2 = trainer_spec::kAdamBeta2.default_value;  // adamw: in [0, 1).
  double adam_eps = trainer_spec::kAdamEps.default_value;      // adamw: >= 0.
};

// Validates `options` and builds the optimizer over `params` (one group, in this order).
// INVALID_ARGUMENT naming the TrainerSpec field (e.g. "trainer.momentum: ...") for a bad
// option or an empty/undefined parameter list.
absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizer(
    std::vector<at::Tensor> params, const OptimizerOptions& options);

// Sets the learning rate of every parameter group of `optimizer` (SGD or AdamW, or any
// LibTorch optimizer whose options implement set_lr).
void SetLearningRate(torch::optim::Optimizer& optimizer, double lr);

// The learning rate of the first parameter group (0 when there is none).
double GetLearningRate(const torch::optim::Optimizer& optimizer);

}  // namespace baton::trainer
