#include "worker/trainer/progress/tracked_communicator.h"

#include <utility>

namespace baton::trainer {
namespace {

class TrackedPending final : public PendingCollective {
 public:
  TrackedPending(std::unique_ptr<PendingCollective> inner, ProgressTracker* tracker)
      : inner_(std::move(inner)), tracker_(tracker) {}

  absl::Status Wait() override {
    tracker_->WaitBegin();
    absl::Status s = inner_->Wait();
    tracker_->WaitEnd();
    return s;
  }

 private:
  std::unique_ptr<PendingCollective> inner_;
  ProgressTracker* const tracker_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<PendingCollective>> TrackedCommunicator::Track(
    absl::StatusOr<std::unique_ptr<PendingCollective>> started) {
  if (!started.ok()) return started;
  return std::unique_ptr<PendingCollective>(
      std::make_unique<TrackedPending>(*std::move(started), tracker_));
}

absl::StatusOr<std::unique_ptr<PendingCollective>> TrackedCommunicator::StartAllReduceSum(
    at::Tensor tensor) {
  tracker_->CollectiveStarted();
  return Track(inner_->StartAllReduceSum(std::move(tensor)));
}

absl::StatusOr<std::unique_ptr<PendingCollective>> TrackedCommunicator::StartAllReduceMean(
    at::Tensor tensor) {
  tracker_->CollectiveStarted();
  return Track(inner_->StartAllReduceMean(std::move(tensor)));
}

absl::Status TrackedCommunicator::Broadcast(at::Tensor& tensor, int root) {
  tracker_->CollectiveStarted();
  tracker_->WaitBegin();
  absl::Status s = inner_->Broadcast(tensor, root);
  tracker_->WaitEnd();
  return s;
}

absl::StatusOr<std::unique_ptr<PendingCollective>> TrackedCommunicator::StartReduceScatterSum(
    at::Tensor input, at::Tensor output) {
  tracker_->CollectiveStarted();
  return Track(inner_->StartReduceScatterSum(std::move(input), std::move(output)));
}

absl::StatusOr<std::unique_ptr<PendingCollective>> TrackedCommunicator::StartAllGather(
    at::Tensor input, at::Tensor output) {
  tracker_->CollectiveStarted();
  return Track(inner_->StartAllGather(std::move(input), std::move(output)));
}

absl::StatusOr<std::unique_ptr<PendingCollective>> TrackedCommunicator::StartSend(at::Tensor tensor,
                                                                                  int dst) {
  tracker_->CollectiveStarted();
  return Track(inner_->StartSend(std::move(tensor), dst));
}

absl::StatusOr<std::unique_ptr<PendingCollective>> TrackedCommunicator::StartRecv(at::Tensor tensor,
                                                                                  int src) {
  tracker_->CollectiveStarted();
  return Track(inner_->StartRecv(std::move(tensor), src));
}

}  // namespace baton::trainer
