#pragma once

// A Communicator that tells a ProgressTracker about every collective of the one it wraps:
// each start, and the time this rank is blocked waiting for one (a pending collective's
// Wait(), a blocking Broadcast). That is what lets the coordinator name the rank a hung
// collective waits for: the waiting ranks say so in their heartbeats, the culprit does not
// (it is in compute, or started fewer collectives, or does not beat at all).

#include <memory>
#include <string>

#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/progress/progress_tracker.h"

namespace baton::trainer {

// Threading: as the wrapped Communicator's (the tracker is thread-safe).
class TrackedCommunicator final : public Communicator {
 public:
  // `inner` and `tracker` must outlive this object.
  TrackedCommunicator(Communicator* inner, ProgressTracker* tracker)
      : inner_(inner), tracker_(tracker) {}

  int rank() const override { return inner_->rank(); }
  int world_size() const override { return inner_->world_size(); }
  c10::Device device() const override { return inner_->device(); }
  std::string backend() const override { return inner_->backend(); }
  bool CanReduce(c10::ScalarType dtype) const override { return inner_->CanReduce(dtype); }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceSum(at::Tensor tensor) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceMean(at::Tensor tensor) override;
  absl::Status Broadcast(at::Tensor& tensor, int root) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartReduceScatterSum(
      at::Tensor input, at::Tensor output) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGather(at::Tensor input,
                                                                    at::Tensor output) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartSend(at::Tensor tensor, int dst) override;
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartRecv(at::Tensor tensor, int src) override;

 private:
  absl::StatusOr<std::unique_ptr<PendingCollective>> Track(
      absl::StatusOr<std::unique_ptr<PendingCollective>> started);

  Communicator* const inner_;
  ProgressTracker* const tracker_;
};

}  // namespace baton::trainer
