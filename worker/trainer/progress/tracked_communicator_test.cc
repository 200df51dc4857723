#include "worker/trainer/progress/tracked_communicator.h"

#include <ATen/ATen.h>

#include <functional>
#include <memory>

#include "common/time/testing/fake_clock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

// A collective whose Wait() runs `during` (to look at the tracker while this rank waits).
class ProbePending final : public PendingCollective {
 public:
  explicit ProbePending(std::function<void()> during) : during_(std::move(during)) {}
  absl::Status Wait() override {
    during_();
    return absl::OkStatus();
  }

 private:
  std::function<void()> during_;
};

class ProbeCommunicator final : public Communicator {
 public:
  std::function<void()> during = [] {};
  int starts = 0;

  int rank() const override { return 0; }
  int world_size() const override { return 2; }
  c10::Device device() const override { return c10::kCPU; }
  std::string backend() const override { return "probe"; }
  bool CanReduce(c10::ScalarType) const override { return true; }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllReduceSum(at::Tensor) override {
    return Started();
  }
  absl::Status Broadcast(at::Tensor&, int) override {
    ++starts;
    during();
    return absl::OkStatus();
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartReduceScatterSum(at::Tensor,
                                                                           at::Tensor) override {
    return Started();
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartAllGather(at::Tensor,
                                                                    at::Tensor) override {
    return Started();
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartSend(at::Tensor, int) override {
    return absl::UnavailableError("peer gone");
  }
  absl::StatusOr<std::unique_ptr<PendingCollective>> StartRecv(at::Tensor, int) override {
    return Started();
  }

 private:
  std::unique_ptr<PendingCollective> Started() {
    ++starts;
    return std::make_unique<ProbePending>([this] { during(); });
  }
};

TEST(TrackedCommunicatorTest, CountsStartsAndMarksWaits) {
  FakeClock clock;
  ProgressTracker tracker(&clock);
  ProbeCommunicator inner;
  TrackedCommunicator comm(&inner, &tracker);
  EXPECT_EQ(comm.backend(), "probe");
  EXPECT_EQ(comm.world_size(), 2);

  at::Tensor t = at::ones({4});
  absl::StatusOr<std::unique_ptr<PendingCollective>> pending = comm.StartAllReduceSum(t);
  ASSERT_TRUE(pending.ok());
  EXPECT_EQ(tracker.Take().collectives, 1);
  EXPECT_FALSE(tracker.Take().waiting);  // started, not waited for yet
  bool waited_while_waiting = false;
  inner.during = [&] {
    clock.Advance(absl::Seconds(2));
    const ProgressTracker::Snapshot s = tracker.Take();
    waited_while_waiting = s.waiting && s.waited == absl::Seconds(2);
  };
  EXPECT_TRUE((*pending)->Wait().ok());
  EXPECT_TRUE(waited_while_waiting);
  EXPECT_FALSE(tracker.Take().waiting);

  // The mean goes through the wrapped communicator's own (default) implementation.
  waited_while_waiting = false;
  pending = comm.StartAllReduceMean(t);
  ASSERT_TRUE(pending.ok());
  EXPECT_TRUE((*pending)->Wait().ok());
  EXPECT_TRUE(waited_while_waiting);
  EXPECT_EQ(inner.starts, 2);

  waited_while_waiting = false;
  EXPECT_TRUE(comm.Broadcast(t, 0).ok());
  EXPECT_TRUE(waited_while_waiting);
  EXPECT_FALSE(tracker.Take().waiting);

  // A collective that fails to start still counts as started; nothing waits.
  EXPECT_FALSE(comm.StartSend(t, 1).ok());
  EXPECT_EQ(tracker.Take().collectives, 4);
  EXPECT_FALSE(tracker.Take().waiting);
}

}  // namespace
}  // namespace baton::trainer
