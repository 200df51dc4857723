#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/time/clock.h"

// The timer bookkeeping shared by every Clock implementation (RealClock here, FakeClock in
// common/time/testing/). Not for use outside Clock implementations.
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

}  // namespace baton
