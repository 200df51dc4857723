#include "worker/host/clock_poll.h"

#include <thread>

#include "absl/time/time.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/testing/fake_clock.h"
#include "gtest/gtest.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {
namespace {

class PollUntilTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_OK(MakePipe(&read_, &write_, O_NONBLOCK)); }
  std::vector<struct pollfd> Readable() const { return {{read_.get(), POLLIN, 0}}; }

  FakeClock clock_;
  UniqueFd read_, write_;
};

TEST_F(PollUntilTest, TimesOutWhenTheClockReachesTheDeadline) {
  const absl::Time deadline = clock_.Now() + absl::Seconds(5);
  absl::StatusOr<int> n;
  std::vector<struct pollfd> fds = Readable();
  std::thread waiter([&] { n = PollUntil(&clock_, deadline, fds); });
  ASSERT_TRUE(clock_.AwaitTimerAt(deadline));  // Blocked in poll() until the clock moves.
  clock_.Advance(absl::Seconds(5));
  waiter.join();
  ASSERT_OK(n);
  EXPECT_EQ(*n, 0);
  ASSERT_EQ(fds.size(), 1u);  // The caller's entries only.
  EXPECT_EQ(fds[0].revents, 0);
  EXPECT_EQ(clock_.NextTimerDeadline(), absl::InfiniteFuture());
}

TEST_F(PollUntilTest, ReturnsTheEventsBeforeTheDeadline) {
  ASSERT_OK(WriteAll(write_.get(), "x", 1));
  std::vector<struct pollfd> fds = Readable();
  absl::StatusOr<int> n = PollUntil(&clock_, clock_.Now() + absl::Hours(1), fds);
  ASSERT_OK(n);
  EXPECT_EQ(*n, 1);
  EXPECT_NE(fds[0].revents & POLLIN, 0);
  fds = Readable();
  n = PollUntil(&clock_, absl::InfiniteFuture(), fds);
  ASSERT_OK(n);
  EXPECT_EQ(*n, 1);
}

TEST_F(PollUntilTest, ADeadlineAlreadyReachedDoesNotBlock) {
  std::vector<struct pollfd> fds = Readable();
  absl::StatusOr<int> n = PollUntil(&clock_, clock_.Now(), fds);
  ASSERT_OK(n);
  EXPECT_EQ(*n, 0);
}

}  // namespace
}  // namespace baton::worker
