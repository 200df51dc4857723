#include "common/time/clock.h"

#include <algorithm>
#include <utility>

#include "common/time/timer_queue.h"

namespace baton {

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

}  // namespace baton
