#include "common/time/testing/fake_clock.h"

#include <algorithm>
#include <utility>

#include "common/time/timer_queue.h"

namespace baton {

FakeClock::FakeClock(absl::Time start)
    : queue_(std::make_unique<clock_internal::TimerQueue>()), now_(start) {}

FakeClock::~FakeClock() = default;

absl::Time FakeClock::Now() const {
  absl::MutexLock lock(&mu_);
  return now_;
}

Clock::Timer FakeClock::After(absl::Duration delay, std::function<void()> fn) {
  return queue_->Add(Now() + std::max(delay, absl::ZeroDuration()), absl::ZeroDuration(),
                     std::move(fn));
}

Clock::Timer FakeClock::Every(absl::Duration period, std::function<void()> fn) {
  return queue_->Add(Now() + std::max(period, absl::ZeroDuration()), period, std::move(fn));
}

bool FakeClock::AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                  absl::Time deadline) {
  if (cond.Eval()) return true;
  if (deadline == absl::InfiniteFuture()) {
    mu->Await(cond);
    return true;
  }
  bool expired = false;  // Guarded by *mu.
  Timer timer = queue_->Add(deadline, absl::ZeroDuration(), [mu, &expired] {
    absl::MutexLock lock(mu);
    expired = true;
  });
  // Advance() sets Now() only after running what is due, so a deadline it passed before
  // the timer was armed shows here.
  if (Now() >= deadline) expired = true;
  auto done = [&cond, &expired] { return expired || cond.Eval(); };
  mu->Await(absl::Condition(&done));
  // The callback takes `mu`: cancel without it.
  mu->Unlock();
  timer.Cancel();
  mu->Lock();
  return cond.Eval();
}

void FakeClock::Advance(absl::Duration d) {
  absl::MutexLock advancing(&advance_mu_);
  RunUntil(Now() + std::max(d, absl::ZeroDuration()));
}

void FakeClock::Set(absl::Time t) {
  absl::MutexLock advancing(&advance_mu_);
  if (t >= Now()) {
    RunUntil(t);
    return;
  }
  absl::MutexLock lock(&mu_);
  now_ = t;
}

void FakeClock::RunUntil(absl::Time target) {
  const auto set_now = [this](absl::Time deadline) {
    absl::MutexLock lock(&mu_);
    now_ = std::max(now_, deadline);
  };
  do {
    while (queue_->RunNext(target, set_now)) {
    }
    set_now(target);
    // A timer armed between the last RunNext() and set_now() is due too.
  } while (queue_->RunNext(target, set_now));
}

bool FakeClock::AwaitTimerAt(absl::Time deadline, absl::Duration timeout) const {
  return queue_->AwaitTimerAt(deadline, timeout);
}

absl::Time FakeClock::NextTimerDeadline() const { return queue_->NextDeadline(); }

}  // namespace baton
