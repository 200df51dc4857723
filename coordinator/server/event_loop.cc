#include "coordinator/server/event_loop.h"

#include <utility>

#include "absl/time/clock.h"

namespace baton::coordinator {

EventLoop::EventLoop() : thread_([this] { Run(); }) {}

EventLoop::~EventLoop() { Stop(); }

void EventLoop::Post(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  tasks_.push_back(std::move(fn));
}

void EventLoop::Every(absl::Duration period, std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  periodic_ = std::move(fn);
  period_ = period;
  next_tick_ = absl::Now() + period;
}

size_t EventLoop::queued() const {
  absl::MutexLock lock(&mu_);
  return tasks_.size();
}

void EventLoop::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
  }
  if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
}

void EventLoop::WhenIdle(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  idle_ = std::move(fn);
}

void EventLoop::Run() {
  bool ran = false;  // a task ran since the idle task last did
  for (;;) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&mu_);
      if (ran && tasks_.empty() && idle_) {
        task = idle_;
        ran = false;
      } else {
        auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
          return !tasks_.empty() || stopping_;
        };
        mu_.AwaitWithDeadline(absl::Condition(&ready), next_tick_);
        // The periodic task goes first when due: a queue that never empties must not
        // starve it (the reconcile expires leases and times out rendezvous).
        if (periodic_ && absl::Now() >= next_tick_) {
          task = periodic_;
          next_tick_ = absl::Now() + period_;
        } else if (!tasks_.empty()) {
          task = std::move(tasks_.front());
          tasks_.pop_front();
        } else if (stopping_) {
          return;
        }
        ran = static_cast<bool>(task);
      }
    }
    if (task) task();
  }
}

}  // namespace baton::coordinator
