#include "worker/agent/serial_executor.h"

#include <utility>

namespace baton::worker {

SerialExecutor::~SerialExecutor() { Stop(); }

void SerialExecutor::Start() { thread_ = std::thread([this] { Loop(); }); }

bool SerialExecutor::Post(std::function<void()> fn) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= max_queued_) return false;
  queue_.push_back(std::move(fn));
  return true;
}

void SerialExecutor::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void SerialExecutor::Loop() {
  for (;;) {
    std::function<void()> fn;
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // Stopping, and everything posted ran.
      fn = std::move(queue_.front());
      queue_.pop_front();
    }
    fn();
  }
}

}  // namespace baton::worker
