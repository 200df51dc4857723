#pragma once

// The load generator's view of its job: WatchJob streams (Watchers) that feed one JobWatch,
// which keeps the times of the job's state changes by the coordinator's event times, how
// each watcher saw the job end, and the latency of the metric points they received.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "baton/v1/job_service.grpc.pb.h"

namespace baton::bench {

// What the watchers saw of the job. The RUNNING time is the coordinator's event time.
// Thread-safe; every Await* blocks until its condition or `deadline` (absl::Now's clock).
class JobWatch {
 public:
  explicit JobWatch(int watchers) : ended_(watchers, baton::v1::JOB_STATE_UNSPECIFIED) {}

  // Records one update from watcher `watcher` (0 <= watcher < watchers).
  void Note(int watcher, const baton::v1::JobUpdate& update);

  // Waits for RUNNING; its coordinator time. DEADLINE_EXCEEDED, or ABORTED if a watcher saw
  // the job end first.
  absl::StatusOr<absl::Time> AwaitRunning(absl::Time deadline);

  // Waits until every watcher saw the job end; OK iff each saw it end in `want`, else
  // FAILED_PRECONDITION naming the first watcher that did not.
  absl::Status AwaitEnd(baton::v1::JobState want, absl::Time deadline);

  // Updates received, by every watcher.
  int64_t updates() const;

  // Collects the latency of every metric point the watchers receive while on.
  void MeasureLatency(bool on);
  // The q-quantile (0..1) of the latencies collected, in ms; 0 if none.
  double LatencyQuantileMs(double q) const;

  // Waits for the first RESTARTING event, then for generation `generation`'s RUNNING; their
  // coordinator times. DEADLINE_EXCEEDED naming the one missing.
  absl::StatusOr<std::pair<absl::Time, absl::Time>> AwaitRestart(int64_t generation,
                                                                 absl::Time deadline);

 private:
  bool AnyEndedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::Time running_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time restarting_time_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  std::map<int64_t, absl::Time> running_by_generation_ ABSL_GUARDED_BY(mu_);
  bool measure_latency_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<double> latencies_ms_ ABSL_GUARDED_BY(mu_);
  std::vector<baton::v1::JobState> ended_ ABSL_GUARDED_BY(mu_);  // UNSPECIFIED: not yet
  std::string failure_ ABSL_GUARDED_BY(mu_);
  int64_t updates_ ABSL_GUARDED_BY(mu_) = 0;
};

// `count` WatchJob streams on one job, each on a thread of its own, noted in a JobWatch (as
// watchers 0..count-1) until Stop() or destruction.
class Watchers {
 public:
  // `jobs` and `watch` must outlive this.
  Watchers(baton::v1::JobService::Stub* jobs, const std::string& job_id, int count,
           JobWatch& watch);
  ~Watchers() { Stop(); }

  Watchers(const Watchers&) = delete;
  Watchers& operator=(const Watchers&) = delete;

  // Cancels every stream and joins the threads; a no-op the second time.
  void Stop();

 private:
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts_;
  std::vector<std::thread> threads_;
};

}  // namespace baton::bench
