#include "worker/trainer/optim/optimizer.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <exception>
#include <tuple>

#include "absl/strings/str_cat.h"

namespace baton::trainer {
namespace {

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("trainer.", field, ": ", what));
}

bool InUnitInterval(double x) { return x >= 0 && x < 1; }

absl::Status Validate(const std::vector<at::Tensor>& params, const OptimizerOptions& o) {
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return Bad("lr", "must be a positive number");
  if (!(o.weight_decay >= 0) || !std::isfinite(o.weight_decay)) {
    return Bad("weight_decay", "must be >= 0");
  }
  if (o.name.empty() || o.name == "sgd") {
    if (!InUnitInterval(o.momentum)) return Bad("momentum", "must be in [0, 1)");
    if (o.nesterov && o.momentum == 0) return Bad("nesterov", "needs momentum > 0");
  } else if (o.name == "adamw") {
    if (!InUnitInterval(o.adam_beta1)) return Bad("adam_beta1", "must be in [0, 1)");
    if (!InUnitInterval(o.adam_beta2)) return Bad("adam_beta2", "must be in [0, 1)");
    if (!(o.adam_eps >= 0) || !std::isfinite(o.adam_eps)) return Bad("adam_eps", "must be >= 0");
  } else {
    return Bad("optimizer", absl::StrCat("unknown optimizer \"", o.name, "\" (want sgd or adamw)"));
  }
  if (params.empty()) return absl::InvalidArgumentError("the model has no parameters");
  for (const at::Tensor& p : params) {
    if (!p.defined()) return absl::InvalidArgumentError("undefined parameter tensor");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> MakeOptimizer(
    std::vector<at::Tensor> params, const OptimizerOptions& o) {
  if (absl::Status s = Validate(params, o); !s.ok()) return s;
  try {
    if (o.name == "adamw") {
      return std::make_unique<torch::optim::AdamW>(
          std::move(params), torch::optim::AdamWOptions(o.lr)
                                 .betas(std::make_tuple(o.adam_beta1, o.adam_beta2))
                                 .eps(o.adam_eps)
                                 .weight_decay(o.weight_decay)
                                 .amsgrad(false));
    }
    return std::make_unique<torch::optim::SGD>(std::move(params), torch::optim::SGDOptions(o.lr)
                                                                      .momentum(o.momentum)
                                                                      .dampening(0)
                                                                      .weight_decay(o.weight_decay)
                                                                      .nesterov(o.nesterov));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("building the optimizer: ", e.what()));
  }
}

void SetLearningRate(torch::optim::Optimizer& optimizer, double lr) {
  for (torch::optim::OptimizerParamGroup& group : optimizer.param_groups()) {
    group.options().set_lr(lr);
  }
}

double GetLearningRate(const torch::optim::Optimizer& optimizer) {
  const auto& groups = optimizer.param_groups();
  return groups.empty() ? 0.0 : groups.front().options().get_lr();
}

}  // namespace baton::trainer
