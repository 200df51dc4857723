#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace baton {

namespace clock_internal {
class TimerQueue;
}  // namespace clock_internal

// Source of the current time, and of the timers and waits measured by it. Every timeout,
// deadline and period in Baton's domain classes comes from an injected Clock, so tests drive
// time with FakeClock (common/time/testing/fake_clock.h) and never wait for real time to pass.
//
// Timers: After() and Every() schedule a callback and return a Timer handle.
//  - A callback runs once the clock reaches its deadline (Now() + delay, a negative delay
//    counting as zero). An Every() timer then re-arms at deadline + period: it does not
//    drift with the callbacks' latency. RealClock skips periods it missed entirely;
//    FakeClock::Advance() fires each one.
//  - Where callbacks run: RealClock runs them on one thread it owns; FakeClock runs them on
//    the thread calling Advance(), in deadline order, with Now() equal to the timer's
//    deadline while it runs. Either way one at a time, never inside After()/Every() (which
//    may therefore be called with locks held that the callback takes).
//  - Callbacks must be short and must not block: they delay every other timer of the clock.
//    They may create and cancel timers, their own included.
//  - Cancel() (also destroying the Timer, or assigning over it): once it returns, the
//    callback is not running and will not run again. If it is running on another thread,
//    Cancel() waits for it to return, so never cancel while holding a lock the callback
//    takes. Called from inside the callback itself it returns at once; the callback
//    finishes normally.
//  - The clock must outlive every Timer it returned.
//
// Waits: AwaitWithDeadline() is absl::Mutex::AwaitWithDeadline with the deadline read on this
// clock: a condition-variable wait for RealClock; for FakeClock a wait that ends when the
// condition holds or when Advance() reaches the deadline (FakeClock::AwaitTimerAt() sees
// the waiting thread as a timer due at the deadline).
//
// Implementations are thread-safe.
class Clock {
 public:
  class Timer;

  virtual ~Clock() = default;

  virtual absl::Time Now() const = 0;

  // Runs `fn` once, when the clock reaches Now() + delay.
  [[nodiscard]] virtual Timer After(absl::Duration delay, std::function<void()> fn) = 0;
  // Runs `fn` at Now() + period, Now() + 2 * period, ... until cancelled. A period <= 0 runs
  // it once, as After(ZeroDuration(), fn).
  [[nodiscard]] virtual Timer Every(absl::Duration period, std::function<void()> fn) = 0;

  // Blocks until `cond` holds or the clock reaches `deadline`; returns whether `cond` holds.
  // `mu` is held on entry and on return and released while waiting (as absl::Mutex::Await
  // does); `cond` is evaluated with it held.
  virtual bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                 absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) = 0;
};

// A scheduled callback (see Clock). Move-only; the default-constructed Timer is inert.
class Clock::Timer {
 public:
  Timer() = default;
  Timer(Timer&& other) noexcept;
  // Cancels this Timer's callback, then takes over `other`'s.
  Timer& operator=(Timer&& other) noexcept;
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  ~Timer() { Cancel(); }

  // Idempotent. See Clock for what it guarantees on return.
  void Cancel();

 private:
  friend class clock_internal::TimerQueue;
  Timer(clock_internal::TimerQueue* queue, uint64_t id) : queue_(queue), id_(id) {}

  clock_internal::TimerQueue* queue_ = nullptr;  // Null once cancelled.
  uint64_t id_ = 0;
};

// Wall-clock time (absl::Now()). Timer callbacks run on a thread started by the first
// After()/Every() and joined by the destructor (which must come after every Timer is gone).
class RealClock final : public Clock {
 public:
  RealClock();
  ~RealClock() override;

  absl::Time Now() const override { return absl::Now(); }
  Timer After(absl::Duration delay, std::function<void()> fn) override;
  Timer Every(absl::Duration period, std::function<void()> fn) override;
  bool AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond, absl::Time deadline)
      override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);

  // A process-wide instance; never destroyed.
  static Clock* Get();

 private:
  void StartThread();

  const std::unique_ptr<clock_internal::TimerQueue> queue_;
  absl::Mutex thread_mu_;
  std::thread thread_ ABSL_GUARDED_BY(thread_mu_);
};

}  // namespace baton
