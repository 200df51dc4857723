#include "worker/trainer/comm/communicator.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <exception>
#include <map>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"

namespace baton::trainer {
namespace {

class DonePending final : public PendingCollective {
 public:
  absl::Status Wait() override { return absl::OkStatus(); }
};

// StartAllReduceMean's default: the sum, then the division when it is waited for.
class MeanAfterSum final : public PendingCollective {
 public:
  MeanAfterSum(std::unique_ptr<PendingCollective> sum, at::Tensor tensor, int world)
      : sum_(std::move(sum)), tensor_(std::move(tensor)), world_(world) {}

  absl::Status Wait() override {
    absl::Status status = sum_->Wait();
    if (!status.ok()) return status;
    try {
      c10::AutoGradMode no_grad(false);
      at::div_out(tensor_, tensor_, MeanDivisor(world_));
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("all-reduce mean: ", e.what()));
    }
    return absl::OkStatus();
  }

 private:
  std::unique_ptr<PendingCollective> sum_;
  at::Tensor tensor_;
  int world_;
};

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

// Indices of `tensors` grouped by dtype (in a fixed dtype order, the same on every rank).
std::map<int, std::vector<size_t>> GroupByDtype(const std::vector<at::Tensor>& tensors) {
  std::map<int, std::vector<size_t>> groups;
  for (size_t i = 0; i < tensors.size(); ++i) {
    groups[static_cast<int>(tensors[i].scalar_type())].push_back(i);
  }
  return groups;
}

}  // namespace

at::Tensor MeanDivisor(int world) {
  return at::scalar_tensor(static_cast<double>(world), at::TensorOptions().dtype(at::kDouble));
}

absl::Status CheckMeanDtype(const at::Tensor& tensor) {
  if (tensor.defined() && at::isFloatingType(tensor.scalar_type())) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("an all-reduce mean needs a floating-point tensor, got ",
                   tensor.defined() ? std::string(c10::toString(tensor.scalar_type())) : "none"));
}

absl::StatusOr<std::unique_ptr<PendingCollective>> Communicator::StartAllReduceMean(
    at::Tensor tensor) {
  if (absl::Status s = CheckMeanDtype(tensor); !s.ok()) return s;
  absl::StatusOr<std::unique_ptr<PendingCollective>> sum = StartAllReduceSum(tensor);
  if (!sum.ok()) return sum.status();
  return std::unique_ptr<PendingCollective>(
      new MeanAfterSum(*std::move(sum), std::move(tensor), world_size()));
}

absl::Status Communicator::AllReduceSum(at::Tensor& tensor) {
  absl::StatusOr<std::unique_ptr<PendingCollective>> pending = StartAllReduceSum(tensor);
  if (!pending.ok()) return pending.status();
  return (*pending)->Wait();
}

absl::Status Communicator::AllReduceMean(at::Tensor& tensor) {
  absl::StatusOr<std::unique_ptr<PendingCollective>> pending = StartAllReduceMean(tensor);
  if (!pending.ok()) return pending.status();
  return (*pending)->Wait();
}

absl::Status Communicator::ReduceScatterSum(at::Tensor input, at::Tensor output) {
  absl::StatusOr<std::unique_ptr<PendingCollective>> pending =
      StartReduceScatterSum(std::move(input), std::move(output));
  if (!pending.ok()) return pending.status();
  return (*pending)->Wait();
}

absl::Status Communicator::AllGather(at::Tensor input, at::Tensor output) {
  absl::StatusOr<std::unique_ptr<PendingCollective>> pending =
      StartAllGather(std::move(input), std::move(output));
  if (!pending.ok()) return pending.status();
  return (*pending)->Wait();
}

absl::Status Communicator::Send(at::Tensor tensor, int dst) {
  absl::StatusOr<std::unique_ptr<PendingCollective>> pending = StartSend(std::move(tensor), dst);
  if (!pending.ok()) return pending.status();
  return (*pending)->Wait();
}

absl::Status Communicator::Recv(at::Tensor tensor, int src) {
  absl::StatusOr<std::unique_ptr<PendingCollective>> pending = StartRecv(std::move(tensor), src);
  if (!pending.ok()) return pending.status();
  return (*pending)->Wait();
}

absl::Status CheckPointToPoint(const Communicator& comm, const at::Tensor& tensor, int peer,
                               const char* what) {
  const std::string name = absl::StrCat(comm.backend(), " ", what);
  if (peer < 0 || peer >= comm.world_size() || peer == comm.rank()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": peer ", peer, " is not another rank (",
                                                   "rank ", comm.rank(), " of ",
                                                   comm.world_size(), ")"));
  }
  if (!tensor.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": undefined tensor"));
  }
  if (tensor.device() != comm.device()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " needs a tensor on ", comm.device().str(),
                                                   ", got ", tensor.device().str()));
  }
  if (tensor.is_sparse() || !tensor.is_contiguous()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " needs a dense contiguous tensor"));
  }
  return absl::OkStatus();
}

c10::ScalarType CopyTypeOfSize(int64_t element_size) {
  switch (element_size) {
    case 1:
      return c10::kByte;
    case 2:
      return c10::kHalf;
    case 4:
      return c10::kInt;
    default:
      return c10::kLong;
  }
}

absl::Status CheckShardedCollective(const Communicator& comm, const at::Tensor& input,
                                    const at::Tensor& output, bool reduce_scatter) {
  const char* what = reduce_scatter ? " reduce-scatter" : " all-gather";
  const std::string name = absl::StrCat(comm.backend(), what);
  if (!input.defined() || !output.defined()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": undefined tensor"));
  }
  if (input.scalar_type() != output.scalar_type()) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": input is ",
                                                   c10::toString(input.scalar_type()), ", output ",
                                                   c10::toString(output.scalar_type())));
  }
  const c10::ScalarType dtype = input.scalar_type();
  if (reduce_scatter && !comm.CanReduce(dtype)) {
    return absl::InvalidArgumentError(
        absl::StrCat(comm.backend(), " cannot reduce ", c10::toString(dtype), " tensors"));
  }
  const int64_t element = input.element_size();
  if (!reduce_scatter && element != 1 && element != 2 && element != 4 && element != 8) {
    return absl::InvalidArgumentError(absl::StrCat(name, " cannot move ", c10::toString(dtype),
                                                   " (", element, " bytes per element)"));
  }
  for (const at::Tensor* t : {&input, &output}) {
    if (t->device() != comm.device()) {
      return absl::InvalidArgumentError(absl::StrCat(
          name, " needs tensors on ", comm.device().str(), ", got ", t->device().str()));
    }
    if (t->is_sparse() || !t->is_contiguous()) {
      return absl::InvalidArgumentError(absl::StrCat(name, " needs dense contiguous tensors"));
    }
  }
  const int64_t world = comm.world_size();
  const at::Tensor& full = reduce_scatter ? input : output;
  const at::Tensor& shard = reduce_scatter ? output : input;
  if (full.numel() != world * shard.numel()) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, ": the ", reduce_scatter ? "input" : "output", " has ", full.numel(),
                     " elements, not world size ", world, " x ", shard.numel(), " (the ",
                     reduce_scatter ? "output" : "input", "'s)"));
  }
  const auto* in = static_cast<const char*>(input.data_ptr());
  const auto* out = static_cast<const char*>(output.data_ptr());
  const int64_t in_bytes = input.numel() * element;
  const int64_t out_bytes = output.numel() * element;
  if (in_bytes > 0 && out_bytes > 0 && in < out + out_bytes && out < in + in_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(name, ": input and output overlap"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<PendingCollective>> LocalCommunicator::StartReduceScatterSum(
    at::Tensor input, at::Tensor output) {
  if (absl::Status s = CheckShardedCollective(*this, input, output, true); !s.ok()) return s;
  output.copy_(input);
  return std::unique_ptr<PendingCollective>(new DonePending());
}

absl::StatusOr<std::unique_ptr<PendingCollective>> LocalCommunicator::StartAllGather(
    at::Tensor input, at::Tensor output) {
  if (absl::Status s = CheckShardedCollective(*this, input, output, false); !s.ok()) return s;
  output.copy_(input);
  return std::unique_ptr<PendingCollective>(new DonePending());
}

absl::StatusOr<std::unique_ptr<PendingCollective>> LocalCommunicator::StartAllReduceSum(
    at::Tensor /*tensor*/) {
  return std::unique_ptr<PendingCollective>(new DonePending());
}

absl::StatusOr<std::unique_ptr<PendingCollective>> LocalCommunicator::StartSend(
    at::Tensor tensor, int dst) {
  absl::Status s = CheckPointToPoint(*this, tensor, dst, "send");
  return s.ok() ? absl::InternalError("local send passed its checks") : s;  // No peer: never.
}

absl::StatusOr<std::unique_ptr<PendingCollective>> LocalCommunicator::StartRecv(
    at::Tensor tensor, int src) {
  absl::Status s = CheckPointToPoint(*this, tensor, src, "recv");
  return s.ok() ? absl::InternalError("local recv passed its checks") : s;
}

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
    for (const auto& [dtype, indices] : GroupByDtype(grads)) {
      std::vector<at::Tensor> group;
      for (const size_t i : indices) group.push_back(grads[i]);
      at::Tensor flat = Flatten(group);
      if (absl::Status s = comm.AllReduceSum(flat); !s.ok()) return s;
      flat.div_(world);
      Unflatten(flat, group);
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("averaging gradients: ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status BroadcastParameters(const std::vector<at::Tensor>& tensors, int root,
                                 Communicator& comm) {
  if (root < 0 || root >= comm.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("broadcast root ", root, " not in world of ", comm.world_size()));
  }
  if (comm.world_size() == 1 || tensors.empty()) return absl::OkStatus();
  try {
    c10::NoGradGuard no_grad;
    std::vector<at::Tensor> values;
    values.reserve(tensors.size());
    for (const at::Tensor& t : tensors) values.push_back(t.detach());
    for (const auto& [dtype, indices] : GroupByDtype(values)) {
      std::vector<at::Tensor> group;
      for (const size_t i : indices) group.push_back(values[i]);
      at::Tensor flat = Flatten(group);
      if (absl::Status s = comm.Broadcast(flat, root); !s.ok()) return s;
      Unflatten(flat, group);
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("broadcasting parameters: ", e.what()));
  }
  return absl::OkStatus();
}

}  // namespace baton::trainer
