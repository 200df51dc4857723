#include "worker/trainer/step/grad_clip.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

namespace baton::trainer {
namespace {

// Defined gradients and their total norm as a 0-dim tensor (undefined when none).
at::Tensor TotalNorm(const std::vector<at::Tensor>& params, std::vector<at::Tensor>* grads) {
  std::vector<at::Tensor> norms;
  for (const at::Tensor& p : params) {
    const at::Tensor& grad = p.grad();
    if (!grad.defined()) continue;
    grads->push_back(grad);
    norms.push_back(grad.detach().norm(2));
  }
  if (norms.empty()) return at::Tensor();
  return norms.size() == 1 ? norms[0] : at::stack(norms).norm(2);
}

}  // namespace

double GradNorm(const std::vector<at::Tensor>& params) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  const at::Tensor total = TotalNorm(params, &grads);
  return total.defined() ? total.item<double>() : 0.0;
}

double ClipGradNorm(const std::vector<at::Tensor>& params, double max_norm) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  const at::Tensor total = TotalNorm(params, &grads);
  if (!total.defined()) return 0.0;
  const at::Tensor coefficient = at::clamp_max(max_norm / (total + 1e-6), 1.0);
  for (at::Tensor& grad : grads) grad.detach().mul_(coefficient);
  return total.item<double>();
}

absl::StatusOr<double> ShardedClipGradNorm(const std::vector<at::Tensor>& shards, double max_norm,
                                           Communicator& comm) {
  c10::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  const at::Tensor local = TotalNorm(shards, &grads);
  at::Tensor squared = at::zeros({}, at::TensorOptions().dtype(at::kDouble).device(comm.device()));
  if (local.defined()) squared.copy_(local.to(at::kDouble).square());
  if (absl::Status s = comm.AllReduceSum(squared); !s.ok()) return s;
  const at::Tensor total = squared.sqrt();
  if (max_norm > 0) {
    const at::Tensor coefficient = at::clamp_max(max_norm / (total + 1e-6), 1.0);
    for (at::Tensor& grad : grads) grad.detach().mul_(coefficient.to(grad.scalar_type()));
  }
  return total.item<double>();
}

}  // namespace baton::trainer
