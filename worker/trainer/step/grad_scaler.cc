#include "worker/trainer/step/grad_scaler.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cmath>
#include <exception>

#include "absl/strings/str_cat.h"

namespace baton::trainer {

GradScaler::GradScaler(const GradScalerOptions& options)
    : options_(options), scale_(options.init_scale) {}

absl::Status GradScaler::Restore(double scale, int64_t growth_tracker) {
  if (!(scale > 0) || !std::isfinite(scale) || growth_tracker < 0) {
    return absl::InvalidArgumentError(absl::StrCat("bad loss-scaler state: scale ", scale,
                                                   ", growth tracker ", growth_tracker));
  }
  scale_ = scale;
  growth_tracker_ = growth_tracker;
  return absl::OkStatus();
}

at::Tensor GradScaler::Scale(const at::Tensor& loss) const {
  return enabled() ? loss * scale_ : loss;
}

absl::StatusOr<bool> GradScaler::UnscaleAndCheck(const std::vector<at::Tensor>& params,
                                                 Communicator& comm) {
  if (!enabled()) return false;
  at::Tensor flag;
  try {
    c10::NoGradGuard no_grad;
    const double inverse = 1.0 / scale_;
    std::vector<at::Tensor> nonfinite;
    for (const at::Tensor& p : params) {
      at::Tensor grad = p.grad();
      if (!grad.defined()) continue;
      grad.mul_(inverse);
      nonfinite.push_back(at::logical_not(at::isfinite(grad)).any());
    }
    flag = nonfinite.empty() ? at::zeros({1}, at::TensorOptions().device(comm.device()))
                             : at::stack(nonfinite).any().to(at::kFloat).reshape({1});
    flag = flag.to(comm.device());
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("unscaling gradients: ", e.what()));
  }
  if (absl::Status s = comm.AllReduceSum(flag); !s.ok()) return s;
  return flag.item<float>() > 0;
}

void GradScaler::Update(bool found_inf) {
  if (!enabled()) return;
  if (found_inf) {
    scale_ *= options_.backoff_factor;
    growth_tracker_ = 0;
    return;
  }
  if (++growth_tracker_ >= options_.growth_interval) {
    scale_ *= options_.growth_factor;
    growth_tracker_ = 0;
  }
}

}  // namespace baton::trainer
