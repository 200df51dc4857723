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
  // `then`, if set, runs after the work completed successfully, inside Wait() (e.g. to copy this
  // rank's chunk out of an emulated collective's buffer).
  C10dPending(c10::intrusive_ptr<c10d::Work> work, std::vector<at::Tensor> tensors,
              std::string what, std::function<void()> then = nullptr)
      : work_(std::move(work)),
        tensors_(std::move(tensors)),
        what_(std::move(what)),
        then_(std::move(then)) {}

  absl::Status Wait() override {
    try {
      work_->wait();
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat(what_, " failed (did a peer exit?): ", FirstLine(e.what())));
    }
    if (then_ != nullptr) {
      try {
        then_();
      } catch (const std::exception& e) {
        return absl::InternalError(absl::StrCat(what_, ": ", FirstLine(e.what())));
      }
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
  std::function<void()> then_;
};

// A collective with nothing to move, complete at once.
class NothingPending final : public PendingCollective {
 public:
  absl::Status Wait() override { return absl::OkStatus(); }
};

// How a group runs reduce-scatter and all-gather.
enum class C10dShardedCollectives {
  // The group's flat collectives, _reduce_scatter_base and _allgather_base (ProcessGroupNCCL:
  // ncclReduceScatter, ncclAllGather).
  kNative,
  // Groups without them (ProcessGroupGloo in LibTorch 1.13 has neither reduce_scatter nor
  // _reduce_scatter_base nor _allgather_base): a reduce-scatter is an in-place all-reduce of the
  // whole input, of which this rank copies its chunk out (about twice the bytes of a real
  // reduce-scatter on a ring, and every rank computes every sum); an all-gather is the list-form
  // allgather into views of the output, with the elements moved as a same-sized integer (or half)
  // type so that any dtype goes through bit for bit (Gloo gathers into one temporary buffer and
  // copies out: one extra copy of the output).
  kEmulated,
};

template <typename Group>
class C10dCommunicator final : public Communicator {
 public:
  C10dCommunicator(c10::intrusive_ptr<Group> group, c10::Device device, std::string backend,
                   std::function<bool(c10::ScalarType)> can_reduce, C10dShardedCollectives sharded)
      : group_(std::move(group)),
        device_(device),
        backend_(std::move(backend)),
        can_reduce_(std::move(can_reduce)),
        sharded_(sharded) {}

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

  absl::StatusOr<std::unique_ptr<PendingCollective>> StartReduceScatterSum(
      at::Tensor input, at::Tensor output) override {
    if (absl::Status s = CheckShardedCollective(*this, input, output, true); !s.ok()) return s;
    const std::string what = backend_ + " reduce-scatter";
    try {
      if (sharded_ == C10dShardedCollectives::kNative) {
        c10::intrusive_ptr<c10d::Work> work = group_->_reduce_scatter_base(output, input);
        return std::unique_ptr<PendingCollective>(
            new C10dPending(std::move(work), {std::move(input), std::move(output)}, what));
      }
      std::vector<at::Tensor> tensors{input};
      c10::intrusive_ptr<c10d::Work> work = group_->allreduce(tensors);
      const int64_t n = output.numel();
      const at::Tensor mine = input.view({-1}).narrow(0, rank() * n, n);
      return std::unique_ptr<PendingCollective>(
          new C10dPending(std::move(work), {input, output}, what,
                          [mine, output] { output.view({-1}).copy_(mine); }));
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat(what, " failed to start: ", C10dPending::FirstLine(e.what())));
    }
  }

  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGather(at::Tensor input,
                                                                    at::Tensor output) override {
    if (absl::Status s = CheckShardedCollective(*this, input, output, false); !s.ok()) return s;
    const std::string what = backend_ + " all-gather";
    // Nothing to move (and Gloo's allgather divides by the size): every rank skips alike.
    if (output.numel() == 0) return std::unique_ptr<PendingCollective>(new NothingPending());
    try {
      if (sharded_ == C10dShardedCollectives::kNative) {
        c10::intrusive_ptr<c10d::Work> work = group_->_allgather_base(output, input);
        return std::unique_ptr<PendingCollective>(
            new C10dPending(std::move(work), {std::move(input), std::move(output)}, what));
      }
      const c10::ScalarType wire = CopyTypeOfSize(input.element_size());
      std::vector<at::Tensor> inputs{input.view({-1}).view(wire)};
      const at::Tensor flat = output.view({-1}).view(wire);
      const int64_t n = input.numel();
      std::vector<std::vector<at::Tensor>> outputs(1);
      for (int r = 0; r < world_size(); ++r) outputs[0].push_back(flat.narrow(0, r * n, n));
      c10::intrusive_ptr<c10d::Work> work = group_->allgather(outputs, inputs);
      return std::unique_ptr<PendingCollective>(
          new C10dPending(std::move(work), {input, output}, what));
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat(what, " failed to start: ", C10dPending::FirstLine(e.what())));
    }
  }

  // The group's send/recv (Gloo: an unbound buffer per transfer, moved by the pair's
  // connection, which keeps a pair's transfers of one tag in order; NCCL: ncclSend/ncclRecv
  // inside a group call, on a communicator c10d builds lazily for the pair). Every transfer
  // uses tag 0, so the order of a pair's transfers is their issue order.
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartSend(at::Tensor tensor,
                                                               int dst) override {
    return StartPointToPoint(std::move(tensor), dst, /*send=*/true);
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartRecv(at::Tensor tensor,
                                                               int src) override {
    return StartPointToPoint(std::move(tensor), src, /*send=*/false);
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
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartPointToPoint(at::Tensor tensor,
                                                                       int peer, bool send) {
    const char* kind = send ? "send" : "recv";
    if (absl::Status s = CheckPointToPoint(*this, tensor, peer, kind); !s.ok()) return s;
    const std::string what = absl::StrCat(backend_, " ", kind, send ? " to rank " : " from rank ",
                                          peer);
    try {
      std::vector<at::Tensor> tensors{std::move(tensor)};
      c10::intrusive_ptr<c10d::Work> work =
          send ? group_->send(tensors, peer, /*tag=*/0) : group_->recv(tensors, peer, /*tag=*/0);
      return std::unique_ptr<PendingCollective>(
          new C10dPending(std::move(work), std::move(tensors), what));
    } catch (const std::exception& e) {
      return absl::UnavailableError(
          absl::StrCat(what, " failed to start: ", C10dPending::FirstLine(e.what())));
    }
  }

  c10::intrusive_ptr<Group> group_;
  const c10::Device device_;
  const std::string backend_;
  const std::function<bool(c10::ScalarType)> can_reduce_;
  const C10dShardedCollectives sharded_;
};

}  // namespace baton::trainer
