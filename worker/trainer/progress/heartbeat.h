#pragma once

// The rank's heartbeat: a thread that writes the tracker's state as a heartbeat line
// (contract.h) on BATON_METRICS_FD every interval. Independent of the training thread, so
// a rank whose training is stuck (a deadlock, a hung device, a peer it waits for) still
// says where it is stuck, and only a process that does not run at all (SIGSTOP, a frozen
// host) falls silent: the coordinator's hang detection tells the two apart.

#include <cstdint>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"
#include "worker/trainer/contract/metrics_writer.h"
#include "worker/trainer/progress/progress_tracker.h"

namespace baton::trainer {

// The fields of heartbeat number `seq` (from 1) for `s`, in the contract's order.
MetricFields HeartbeatFields(int64_t seq, const ProgressTracker::Snapshot& s);

// Nothing is written while the tracker is parked (between generations).
// Threading: the constructor starts the thread (none when `fd` < 0 or `interval` is zero),
// the destructor stops and joins it. Write errors (the worker gone) end the beats quietly.
class Heartbeat {
 public:
  // `tracker` and `clock` must outlive this object; `fd` is not owned.
  Heartbeat(const ProgressTracker* tracker, Clock* clock, int fd, absl::Duration interval);
  ~Heartbeat();
  Heartbeat(const Heartbeat&) = delete;
  Heartbeat& operator=(const Heartbeat&) = delete;

 private:
  void Run();

  const ProgressTracker* const tracker_;
  Clock* const clock_;
  MetricsWriter writer_;
  const absl::Duration interval_;
  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace baton::trainer
