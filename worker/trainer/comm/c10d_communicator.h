#pragma once

// A Communicator over a concrete c10d process group (ProcessGroupGloo, ProcessGroupNCCL).
// A template over the group type so that no code names the groups' base class, which is
// c10d::ProcessGroup in LibTorch 1.13 and c10d::Backend in 2.x (see device/compat.h); the
// collectives used have the same signatures in both. Included only by the backends'
// .cc files (gloo_communicator.cc, nccl_communicator.cc), after the group's header.
//
// Threading: as Communicator (no concurrent calls). A PendingCollective may be waited on
// from another thread than the one that started it.

#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "worker/trainer/comm/communicator.h"

namespace baton::trainer {

class C10dPending final : public PendingCollective {
 public:
  C10dPending(c10::intrusive_ptr<c10d::Work> work, std::vector<at::Tensor> tensors,
              std::string what)
      : work_(std::move(work)), tensors_(std::move(tensors)), what_(std::move(what)) {}

  absl::Status Wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat(what_, " failed (did a peer exit?): ", FirstLine(e.what())));
    }
    return absl::OkStatus();
  }

  // LibTorch messages carry a backtrace after the first line.
  static std::string FirstLine(const char* message) {
    const std::string s(message);
    return s.substr(0, s.find('\n'));
  }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  std::vector<at::Tensor> tensors_;  // Kept alive until the collective completed.
  std::string what_;
};

template <typename Group>
class C10dCommunicator final : public Communicator {
 public:
  C10dCommunicator(c10::intrusive_ptr<Group> group, c10::Device device, std::string backend,
                   std::function<bool(c10::ScalarType)> can_reduce)
      : group_(std::move(group)),
        device_(device),
        backend_(std::move(backend)),
        can_reduce_(std::move(can_reduce)) {}

  int rank() const override { return group_->getRank(); }
  int world_size() const override { return group_->getSize(); }
  c10::Device device() const override { return device_; }
  std::string backend() const override { return backend_; }
  bool CanReduce(c10::ScalarType dtype) const override { return can_reduce_(dtype); }

  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceSum(
      at::Tensor tensor) override {
    if (!CanReduce(tensor.scalar_type())) {
      return absl::InvalidArgumentError(absl::StrCat(
          backend_, " cannot all-reduce ", c10::toString(tensor.scalar_type()), " tensors"));
    }
    if (tensor.device() != device_) {
      return absl::InvalidArgumentError(absl::StrCat(backend_, " all-reduce needs tensors on ",
                                                     device_.str(), ", got ",
                                                     tensor.device().str()));
    }
    try {
      std::vector<at::Tensor> tensors{std::move(tensor)};
      c10::intrusive_ptr<c10d::Work> work = group_->allreduce(tensors);
      return std::unique_ptr<PendingCollective>(
          new C10dPending(std::move(work), std::move(tensors), backend_ + " all-reduce"));
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(backend_, " all-reduce failed to start: ",
                                                 C10dPending::FirstLine(e.what())));
    }
  }

  absl::Status Broadcast(at::Tensor& tensor, int root) override {
    if (root < 0 || root >= world_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("broadcast root ", root, " not in world of ", world_size()));
    }
    try {
      std::vector<at::Tensor> tensors{tensor};
      c10d::BroadcastOptions options;
      options.rootRank = root;
      group_->broadcast(tensors, options)->wait();
    } catch (const std::exception& e) {
      return absl::UnavailableError(absl::StrCat(backend_, " broadcast failed (did a peer exit?): ",
                                                 C10dPending::FirstLine(e.what())));
    }
    return absl::OkStatus();
  }

 private:
  c10::intrusive_ptr<Group> group_;
  const c10::Device device_;
  const std::string backend_;
  const std::function<bool(c10::ScalarType)> can_reduce_;
};

}  // namespace baton::trainer
