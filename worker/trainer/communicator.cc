#include "worker/trainer/communicator.h"

#include <ATen/ATen.h>

#include <exception>

#include "absl/strings/str_cat.h"

namespace baton::trainer {
namespace {

at::Tensor Flatten(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const at::Tensor& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Copies consecutive slices of `flat` into `tensors`.
void Unflatten(const at::Tensor& flat, const std::vector<at::Tensor>& tensors) {
  int64_t offset = 0;
  for (const at::Tensor& t : tensors) {
    const int64_t n = t.numel();
    at::Tensor target = t;  // Shares storage: copy_ writes into the caller's tensor.
    target.copy_(flat.narrow(0, offset, n).view(t.sizes()));
    offset += n;
  }
}

}  // namespace

absl::Status LocalCommunicator::AllReduceSum(at::Tensor& /*tensor*/) { return absl::OkStatus(); }

absl::Status LocalCommunicator::Broadcast(at::Tensor& /*tensor*/, int root) {
  if (root != 0) {
    return absl::InvalidArgumentError(absl::StrCat("broadcast root ", root, " not in world of 1"));
  }
  return absl::OkStatus();
}

absl::Status AverageGradients(const std::vector<at::Tensor>& parameters, Communicator& comm) {
  const int world = comm.world_size();
  if (world == 1 || parameters.empty()) return absl::OkStatus();
  try {
    std::vector<at::Tensor> grads;
    grads.reserve(parameters.size());
    for (const at::Tensor& p : parameters) {
      at::Tensor& grad = p.mutable_grad();
      if (!grad.defined()) grad = at::zeros_like(p);
      grads.push_back(grad);
    }
    at::Tensor flat = Flatten(grads);
    if (absl::Status s = comm.AllReduceSum(flat); !s.ok()) return s;
    flat.div_(world);
    Unflatten(flat, grads);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("averaging gradients: ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status BroadcastParameters(const std::vector<at::Tensor>& parameters, int root,
                                 Communicator& comm) {
  if (root < 0 || root >= comm.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast root ", root, " not in world of ", comm.world_size()));
  }
  if (comm.world_size() == 1 || parameters.empty()) return absl::OkStatus();
  try {
    at::NoGradGuard no_grad;
    std::vector<at::Tensor> values;
    values.reserve(parameters.size());
    for (const at::Tensor& p : parameters) values.push_back(p.detach());
    at::Tensor flat = Flatten(values);
    if (absl::Status s = comm.Broadcast(flat, root); !s.ok()) return s;
    Unflatten(flat, values);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("broadcasting parameters: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace baton::trainer
