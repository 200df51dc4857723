#pragma once

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace baton::coordinator {

// A single thread that runs posted closures one at a time, in posting order, plus an
// optional periodic task. The coordinator's domain objects are owned by this thread:
// gRPC handlers post work here instead of locking (so no lock is ever held across a
// SQLite write or a send).
//
// Thread-safe. Closures must not block for long (no network waits).
class EventLoop {
 public:
  EventLoop();
  // Stops the loop (see Stop).
  ~EventLoop();

  EventLoop(const EventLoop&) = delete;
  EventLoop& operator=(const EventLoop&) = delete;

  // Queues `fn`. After Stop(), `fn` is dropped.
  void Post(std::function<void()> fn);
  // Runs `fn` on the loop every `period` (wall time), first after one period. At most one
  // periodic task; a second call replaces the first.
  void Every(absl::Duration period, std::function<void()> fn);
  // Runs `fn` on the loop whenever it runs out of work: after a task (posted or periodic)
  // that left the queue empty, before the loop waits or stops. A burst of posted tasks
  // is followed by one call (e.g. one group commit for the burst). At most one idle task;
  // a second call replaces the first.
  void WhenIdle(std::function<void()> fn);
  // Runs every closure already queued, then joins the thread. Idempotent.
  void Stop();
  // Closures queued and not yet started. Producers that can wait (a worker stream's
  // reads) post only while this is low, which bounds the queue.
  size_t queued() const;

 private:
  void Run();

  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  std::function<void()> periodic_ ABSL_GUARDED_BY(mu_);
  std::function<void()> idle_ ABSL_GUARDED_BY(mu_);
  absl::Duration period_ ABSL_GUARDED_BY(mu_) = absl::InfiniteDuration();
  absl::Time next_tick_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace baton::coordinator
