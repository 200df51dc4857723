#pragma once

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace baton::worker {

// Runs closures one at a time, in the order they were posted, on a thread of its own, so
// that work which may block (a peer probe, a spawn) does not hold up the thread posting it.
// At most `max_queued` closures wait; Post() refuses more. Thread-safe.
class SerialExecutor {
 public:
  explicit SerialExecutor(size_t max_queued = 1024) : max_queued_(max_queued) {}
  ~SerialExecutor();  // Stop().
  SerialExecutor(const SerialExecutor&) = delete;
  SerialExecutor& operator=(const SerialExecutor&) = delete;

  // Starts the thread. Call once.
  void Start();
  // Queues `fn` to run after every closure posted before it. Returns false, dropping `fn`,
  // once Stop() began or while max_queued closures wait.
  bool Post(std::function<void()> fn);
  // Runs what was posted before it (the closure running first), then ends the thread;
  // without Start(), drops it.
  // Idempotent; not from a closure.
  void Stop();

 private:
  void Loop();

  const size_t max_queued_;
  absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace baton::worker
