#pragma once

#include <functional>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"

namespace baton {

// Simulated time: the clock only moves when told to, and moving it runs the timers that fall
// due (see Clock). Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::UnixEpoch() + absl::Hours(24 * 365 * 50));
  ~FakeClock() override;

  absl::Time Now() const override;
  Timer After(absl::Duration delay, std::function<void()> fn) override;
  Timer Every(absl::Duration period, std::function<void()> fn) override;
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline)
      override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // Moves the clock forward by `d` (negative: zero), first running, on this thread and in
  // deadline order, every timer due by Now() + d, including those that callbacks arm within
  // the span; each runs with Now() at its deadline. Returns once they all ran, with Now() at
  // the old Now() + d. Concurrent Advance()/Set() calls take turns. Must not be called from
  // a timer callback.
  void Advance(absl::Duration d);
  // Moves the clock to `t`: forward as Advance(t - Now()); backward without running anything.
  void Set(absl::Time t);

  // Test synchronisation, so a test advances only once the code under test waits: blocks
  // for at most `timeout` of real time until a timer due exactly at `deadline` is pending (a
  // component armed that timeout, or a thread waits in AwaitWithDeadline(..., deadline)).
  // Returns whether one is.
  bool AwaitTimerAt(absl::Time deadline, absl::Duration timeout = absl::Seconds(30)) const;
  // The earliest pending timer's deadline; InfiniteFuture if none is pending.
  absl::Time NextTimerDeadline() const;

 private:
  // Runs every timer due by `target`; then Now() is at least `target`.
  void RunUntil(absl::Time target) ABSL_EXCLUSIVE_LOCKS_REQUIRED(advance_mu_);

  const std::unique_ptr<clock_internal::TimerQueue> queue_;
  absl::Mutex advance_mu_;  // Serialises Advance() and Set().
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton
