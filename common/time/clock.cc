#include "common/time/clock.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

namespace baton {
namespace clock_internal {

// The timers of one clock, and the bookkeeping behind Timer::Cancel()'s guarantee. Callbacks
// run one at a time: RealClock has one thread, FakeClock serialises Advance().
class TimerQueue {
 public:
  // A timer due at `deadline`, repeating every `period` if that is positive.
  Clock::Timer Add(absl::Time deadline, absl::Duration period, std::function<void()> fn) {
    absl::MutexLock lock(&mu_);
    const uint64_t id = next_id_++;
    timers_.emplace(id, Entry{deadline, period,
                              std::make_shared<std::function<void()>>(std::move(fn))});
    order_.emplace(deadline, id);
    if (order_.begin()->second == id) changed_.Signal();  // A new earliest deadline.
    return Clock::Timer(this, id);
  }

  void Cancel(uint64_t id) {
    std::shared_ptr<std::function<void()>> fn;  // Destroyed once mu_ is released.
    absl::MutexLock lock(&mu_);
    if (auto it = timers_.find(id); it != timers_.end()) {
      fn = std::move(it->second.fn);
      order_.erase({it->second.deadline, id});
      timers_.erase(it);
    }
    if (running_ == id && running_thread_ != std::this_thread::get_id()) {
      auto done = [this, id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return running_ != id; };
      mu_.Await(absl::Condition(&done));
    }
  }

  // Runs the earliest timer if it is due by `limit`, calling `set_now(deadline)` first.
  // Returns whether it ran one.
  bool RunNext(absl::Time limit, const std::function<void(absl::Time)>& set_now) {
    absl::MutexLock lock(&mu_);
    if (order_.empty() || order_.begin()->first > limit) return false;
    RunFirstLocked(absl::InfinitePast(), set_now);
    return true;
  }

  // RealClock's thread: runs timers as they fall due by absl::Now() until Stop().
  void RunInRealTime() {
    absl::MutexLock lock(&mu_);
    while (!stopping_) {
      const absl::Time next = order_.empty() ? absl::InfiniteFuture() : order_.begin()->first;
      const absl::Time now = absl::Now();
      if (next > now) {
        changed_.WaitWithDeadline(&mu_, next);  // Or until Add() or Stop() signals.
        continue;
      }
      RunFirstLocked(now, nullptr);
    }
  }

  void Stop() {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    changed_.Signal();
  }

  absl::Time NextDeadline() const {
    absl::MutexLock lock(&mu_);
    return order_.empty() ? absl::InfiniteFuture() : order_.begin()->first;
  }

  bool AwaitTimerAt(absl::Time deadline, absl::Duration timeout) const {
    absl::MutexLock lock(&mu_);
    auto pending = [this, deadline]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      auto it = order_.lower_bound({deadline, 0});
      return it != order_.end() && it->first == deadline;
    };
    return mu_.AwaitWithTimeout(absl::Condition(&pending), timeout);
  }

 private:
  struct Entry {
    absl::Time deadline;
    absl::Duration period;  // Positive: repeats.
    // Shared with a run in progress, so cancelling during the run keeps it alive.
    std::shared_ptr<std::function<void()>> fn;
  };

  // Takes the earliest timer, re-arms it if it repeats (skipping periods that end before
  // `skip_until`), and runs it with mu_ released.
  void RunFirstLocked(absl::Time skip_until, const std::function<void(absl::Time)>& set_now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    const auto [deadline, id] = *order_.begin();
    order_.erase(order_.begin());
    auto it = timers_.find(id);
    std::shared_ptr<std::function<void()>> fn = it->second.fn;
    if (const absl::Duration period = it->second.period; period > absl::ZeroDuration()) {
      absl::Time next = deadline + period;
      if (next < skip_until) next += absl::Ceil(skip_until - next, period);
      it->second.deadline = next;
      order_.emplace(next, id);
    } else {
      timers_.erase(it);
    }
    running_ = id;
    running_thread_ = std::this_thread::get_id();
    mu_.Unlock();
    if (set_now) set_now(deadline);
    (*fn)();
    fn.reset();  // Whatever the callback captured goes before Cancel() can return.
    mu_.Lock();
    running_ = 0;
  }

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // For RunInRealTime(): an earlier deadline, or Stop().
  uint64_t next_id_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, Entry> timers_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<absl::Time, uint64_t>> order_ ABSL_GUARDED_BY(mu_);  // (deadline, id)
  uint64_t running_ ABSL_GUARDED_BY(mu_) = 0;  // The timer whose callback runs; 0: none.
  std::thread::id running_thread_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace clock_internal

// ---------------------------------------------------------------------------------------
// Timer.
// ---------------------------------------------------------------------------------------

Clock::Timer::Timer(Timer&& other) noexcept
    : queue_(std::exchange(other.queue_, nullptr)), id_(other.id_) {}

Clock::Timer& Clock::Timer::operator=(Timer&& other) noexcept {
  if (this != &other) {
    Cancel();
    queue_ = std::exchange(other.queue_, nullptr);
    id_ = other.id_;
  }
  return *this;
}

void Clock::Timer::Cancel() {
  if (queue_ == nullptr) return;
  queue_->Cancel(id_);
  queue_ = nullptr;
}

// ---------------------------------------------------------------------------------------
// RealClock.
// ---------------------------------------------------------------------------------------

RealClock::RealClock() : queue_(std::make_unique<clock_internal::TimerQueue>()) {}

RealClock::~RealClock() {
  queue_->Stop();
  absl::MutexLock lock(&thread_mu_);
  if (thread_.joinable()) thread_.join();
}

Clock* RealClock::Get() {
  static Clock* const clock = new RealClock();
  return clock;
}

void RealClock::StartThread() {
  absl::MutexLock lock(&thread_mu_);
  if (!thread_.joinable()) thread_ = std::thread([this] { queue_->RunInRealTime(); });
}

Clock::Timer RealClock::After(absl::Duration delay, std::function<void()> fn) {
  StartThread();
  return queue_->Add(Now() + std::max(delay, absl::ZeroDuration()), absl::ZeroDuration(),
                     std::move(fn));
}

Clock::Timer RealClock::Every(absl::Duration period, std::function<void()> fn) {
  StartThread();
  return queue_->Add(Now() + std::max(period, absl::ZeroDuration()), period, std::move(fn));
}

bool RealClock::AwaitWithDeadline(absl::Mutex* mu, const absl::Condition& cond,
                                  absl::Time deadline) {
  return mu->AwaitWithDeadline(cond, deadline);
}

// ---------------------------------------------------------------------------------------
// FakeClock.
// ---------------------------------------------------------------------------------------

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
