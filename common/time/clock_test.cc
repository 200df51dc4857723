#include "common/time/clock.h"

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

using ::testing::ElementsAre;

// Real-time bound on waits for another thread; never a duration the test asserts.
constexpr absl::Duration kPatience = absl::Seconds(30);

// Records "<name>@<seconds since start>" for each callback run. Thread-safe.
class Log {
 public:
  Log(const Clock* clock, absl::Time start) : clock_(clock), start_(start) {}
  std::function<void()> Entry(const std::string& name) {
    return [this, name] {
      absl::MutexLock lock(&mu_);
      entries_.push_back(
          absl::StrCat(name, "@", absl::ToDoubleSeconds(clock_->Now() - start_)));
    };
  }
  std::vector<std::string> entries() const {
    absl::MutexLock lock(&mu_);
    return entries_;
  }
  // Waits (real time, bounded) until `n` entries are recorded.
  bool AwaitEntries(size_t n) const {
    absl::MutexLock lock(&mu_);
    auto enough = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return entries_.size() >= n; };
    return mu_.AwaitWithTimeout(absl::Condition(&enough), kPatience);
  }

 private:
  const Clock* const clock_;
  const absl::Time start_;
  mutable absl::Mutex mu_;
  std::vector<std::string> entries_ ABSL_GUARDED_BY(mu_);
};

// ---------------------------------------------------------------------------------------
// FakeClock.
// ---------------------------------------------------------------------------------------

class FakeClockTest : public ::testing::Test {
 protected:
  FakeClock clock_;
  const absl::Time start_ = clock_.Now();
  Log log_{&clock_, start_};
};

TEST_F(FakeClockTest, AdvanceFiresDueTimersInDeadlineOrderWithNowAtTheirDeadline) {
  Clock::Timer c = clock_.After(absl::Seconds(3), log_.Entry("c"));
  Clock::Timer a = clock_.After(absl::Seconds(1), log_.Entry("a"));
  Clock::Timer b = clock_.After(absl::Seconds(2), log_.Entry("b"));
  Clock::Timer b2 = clock_.After(absl::Seconds(2), log_.Entry("b2"));  // Ties: creation order.
  Clock::Timer late = clock_.After(absl::Seconds(6), log_.Entry("late"));
  clock_.Advance(absl::Milliseconds(999));
  EXPECT_THAT(log_.entries(), ::testing::IsEmpty());
  clock_.Advance(absl::Milliseconds(4001));
  EXPECT_THAT(log_.entries(), ElementsAre("a@1", "b@2", "b2@2", "c@3"));
  EXPECT_EQ(clock_.Now(), start_ + absl::Seconds(5));
  EXPECT_EQ(clock_.NextTimerDeadline(), start_ + absl::Seconds(6));
}

TEST_F(FakeClockTest, CallbacksRunOnTheAdvancingThread) {
  std::thread::id ran_on;
  Clock::Timer t = clock_.After(absl::Seconds(1), [&] { ran_on = std::this_thread::get_id(); });
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(ran_on, std::this_thread::get_id());
}

TEST_F(FakeClockTest, EveryRearmsAtEachPeriodAndTimersArmedWithinTheSpanFire) {
  Clock::Timer every = clock_.Every(absl::Seconds(2), log_.Entry("tick"));
  Clock::Timer chained;
  Clock::Timer first = clock_.After(absl::Seconds(1), [&] {
    log_.Entry("first")();
    chained = clock_.After(absl::Seconds(2), log_.Entry("chained"));  // Due at 3 s.
  });
  clock_.Advance(absl::Seconds(7));
  EXPECT_THAT(log_.entries(),
              ElementsAre("first@1", "tick@2", "chained@3", "tick@4", "tick@6"));
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(log_.entries().back(), "tick@8");
}

TEST_F(FakeClockTest, ZeroDelayFiresOnTheNextAdvanceNeverInsideAfter) {
  Clock::Timer t = clock_.After(absl::ZeroDuration(), log_.Entry("now"));
  Clock::Timer negative = clock_.After(absl::Seconds(-5), log_.Entry("negative"));
  EXPECT_THAT(log_.entries(), ::testing::IsEmpty());
  clock_.Advance(absl::ZeroDuration());
  EXPECT_THAT(log_.entries(), ElementsAre("now@0", "negative@0"));
}

TEST_F(FakeClockTest, CancelledDestroyedAndReplacedTimersDoNotFire) {
  Clock::Timer cancelled = clock_.After(absl::Seconds(1), log_.Entry("cancelled"));
  cancelled.Cancel();
  cancelled.Cancel();  // Idempotent.
  { Clock::Timer destroyed = clock_.After(absl::Seconds(1), log_.Entry("destroyed")); }
  Clock::Timer replaced = clock_.After(absl::Seconds(1), log_.Entry("replaced"));
  replaced = clock_.After(absl::Seconds(1), log_.Entry("replacement"));
  Clock::Timer moved_from = clock_.Every(absl::Seconds(1), log_.Entry("moved"));
  Clock::Timer moved_to = std::move(moved_from);
  moved_from.Cancel();  // Inert after the move: the timer lives on in moved_to.
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(log_.entries(), ElementsAre("replacement@1", "moved@1"));
  moved_to.Cancel();
  clock_.Advance(absl::Seconds(5));
  EXPECT_THAT(log_.entries(), ElementsAre("replacement@1", "moved@1"));
  EXPECT_EQ(clock_.NextTimerDeadline(), absl::InfiniteFuture());
}

TEST_F(FakeClockTest, ACallbackCanCancelItselfAndOthers) {
  int runs = 0;
  Clock::Timer other = clock_.After(absl::Seconds(10), log_.Entry("other"));
  Clock::Timer self;
  self = clock_.Every(absl::Seconds(1), [&] {
    if (++runs == 3) {
      self.Cancel();  // Returns at once although its own callback is running.
      other = Clock::Timer();
    }
  });
  clock_.Advance(absl::Seconds(20));
  EXPECT_EQ(runs, 3);
  EXPECT_THAT(log_.entries(), ::testing::IsEmpty());
}

TEST_F(FakeClockTest, CancelWaitsForTheRunningCallback) {
  absl::Notification started, release;
  std::atomic<bool> finished{false};
  Clock::Timer t = clock_.After(absl::Seconds(1), [&] {
    started.Notify();
    release.WaitForNotification();
    finished = true;
  });
  std::thread advancer([&] { clock_.Advance(absl::Seconds(1)); });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kPatience));
  std::atomic<bool> finished_when_cancel_returned{false};
  std::thread canceller([&] {
    t.Cancel();
    finished_when_cancel_returned = finished.load();
  });
  release.Notify();
  canceller.join();
  advancer.join();
  EXPECT_TRUE(finished_when_cancel_returned);
}

TEST_F(FakeClockTest, AwaitWithDeadlineEndsWhenAdvancePassesTheDeadline) {
  absl::Mutex mu;
  bool never = false;
  std::atomic<bool> returned{false};
  bool result = true;
  absl::Time returned_at;
  const absl::Time deadline = start_ + absl::Hours(1);
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    result = clock_.AwaitWithDeadline(&mu, absl::Condition(&never), deadline);
    returned_at = clock_.Now();
    returned = true;
  });
  ASSERT_TRUE(clock_.AwaitTimerAt(deadline));  // The waiter is blocked on the clock.
  clock_.Advance(absl::Minutes(59));
  EXPECT_FALSE(returned);  // Its wakeup could only come from this thread's Advance().
  clock_.Advance(absl::Minutes(1));
  waiter.join();
  EXPECT_FALSE(result);
  EXPECT_EQ(returned_at, deadline);
  EXPECT_EQ(clock_.NextTimerDeadline(), absl::InfiniteFuture());
}

TEST_F(FakeClockTest, AwaitWithDeadlineReturnsWhenTheConditionHolds) {
  absl::Mutex mu;
  bool ready = false;
  bool result = false;
  const absl::Time deadline = start_ + absl::Hours(1);
  std::thread waiter([&] {
    absl::MutexLock lock(&mu);
    result = clock_.AwaitWithDeadline(&mu, absl::Condition(&ready), deadline);
  });
  ASSERT_TRUE(clock_.AwaitTimerAt(deadline));
  {
    absl::MutexLock lock(&mu);
    ready = true;
  }
  waiter.join();
  EXPECT_TRUE(result);
  EXPECT_EQ(clock_.Now(), start_);
  // A deadline already reached does not wait.
  absl::MutexLock lock(&mu);
  bool no = false;
  EXPECT_FALSE(clock_.AwaitWithDeadline(&mu, absl::Condition(&no), start_));
}

TEST_F(FakeClockTest, SetMovesForwardLikeAdvanceAndBackwardFiringNothing) {
  Clock::Timer t = clock_.After(absl::Seconds(2), log_.Entry("t"));
  clock_.Set(start_ - absl::Seconds(10));
  EXPECT_THAT(log_.entries(), ::testing::IsEmpty());
  clock_.Set(start_ + absl::Seconds(2));
  EXPECT_THAT(log_.entries(), ElementsAre("t@2"));
}

// ---------------------------------------------------------------------------------------
// RealClock. Waits are bounded by kPatience; nothing asserts how long anything took.
// ---------------------------------------------------------------------------------------

TEST(RealClock, TimersFireInDeadlineOrderOnTheClocksThread) {
  RealClock clock;
  Log log(&clock, clock.Now());
  std::atomic<bool> other_thread{false};
  const std::thread::id test_thread = std::this_thread::get_id();
  Clock::Timer b = clock.After(absl::Milliseconds(20), log.Entry("b"));
  Clock::Timer a = clock.After(absl::Milliseconds(10), [&] {
    other_thread = std::this_thread::get_id() != test_thread;
    log.Entry("a")();
  });
  ASSERT_TRUE(log.AwaitEntries(2));
  const std::vector<std::string> entries = log.entries();
  EXPECT_TRUE(absl::StartsWith(entries[0], "a@")) << entries[0];
  EXPECT_TRUE(absl::StartsWith(entries[1], "b@")) << entries[1];
  EXPECT_TRUE(other_thread);
}

TEST(RealClock, EveryRepeatsUntilCancelledFromInsideItsCallback) {
  RealClock clock;
  absl::Mutex mu;
  int runs = 0;
  Clock::Timer every;
  {
    absl::MutexLock lock(&mu);  // `every` is assigned before the callback can touch it.
    every = clock.Every(absl::Milliseconds(1), [&] {
      absl::MutexLock lock(&mu);
      if (++runs == 3) every.Cancel();
    });
  }
  {
    absl::MutexLock lock(&mu);
    auto three = [&] { return runs >= 3; };
    ASSERT_TRUE(mu.AwaitWithTimeout(absl::Condition(&three), kPatience));
  }
  // Timers run in deadline order on one thread: once a later one ran, a fourth run of the
  // 1 ms timer would have come first.
  absl::Notification later;
  Clock::Timer marker = clock.After(absl::Milliseconds(5), [&] { later.Notify(); });
  ASSERT_TRUE(later.WaitForNotificationWithTimeout(kPatience));
  absl::MutexLock lock(&mu);
  EXPECT_EQ(runs, 3);
}

TEST(RealClock, CancelWaitsForTheRunningCallbackAndStopsIt) {
  RealClock clock;
  absl::Notification started, release;
  std::atomic<bool> finished{false};
  std::atomic<int> runs{0};
  Clock::Timer t = clock.Every(absl::Milliseconds(1), [&] {
    if (runs++ > 0) return;
    started.Notify();
    release.WaitForNotification();
    finished = true;
  });
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kPatience));
  std::atomic<bool> finished_when_cancel_returned{false};
  std::thread canceller([&] {
    t.Cancel();
    finished_when_cancel_returned = finished.load();
  });
  release.Notify();
  canceller.join();
  EXPECT_TRUE(finished_when_cancel_returned);
  const int after_cancel = runs;
  // Later timers run on the same thread: once this one ran, the cancelled one cannot run
  // again.
  absl::Notification later;
  Clock::Timer marker = clock.After(absl::Milliseconds(5), [&] { later.Notify(); });
  ASSERT_TRUE(later.WaitForNotificationWithTimeout(kPatience));
  EXPECT_EQ(runs, after_cancel);
}

TEST(RealClock, AwaitWithDeadlineEndsAtTheDeadlineOrWhenTheConditionHolds) {
  RealClock clock;
  absl::Mutex mu;
  bool never = false;
  absl::MutexLock lock(&mu);
  EXPECT_FALSE(
      clock.AwaitWithDeadline(&mu, absl::Condition(&never), clock.Now() + absl::Milliseconds(5)));
  EXPECT_FALSE(clock.AwaitWithDeadline(&mu, absl::Condition(&never), absl::InfinitePast()));
  bool ready = false;
  std::thread setter([&] {
    absl::MutexLock lock(&mu);
    ready = true;
  });
  EXPECT_TRUE(clock.AwaitWithDeadline(&mu, absl::Condition(&ready), clock.Now() + kPatience));
  mu.Unlock();
  setter.join();
  mu.Lock();
}

}  // namespace
}  // namespace baton
