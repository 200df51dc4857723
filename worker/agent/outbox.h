#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"
#include "worker/supervisor/supervisor.h"

namespace baton::worker {

struct OutboxOptions {
  // A batch of log lines / metric points is sent once its oldest entry is this old,
  absl::Duration flush_interval = absl::Milliseconds(200);
  // or once it holds this many entries or this many bytes of text. Also the largest
  // LogsReport/MetricsReport sent, which keeps messages far below gRPC's 4 MiB limit.
  size_t max_batch_entries = 100;
  size_t max_batch_bytes = 1 << 20;
  // Beyond this backlog (the coordinator reads too slowly) new entries are dropped, counted.
  size_t max_pending_entries = 10000;
  size_t max_pending_bytes = 16 << 20;
};

// What the agent's writer sends besides the level-triggered reports (report_ledger.h):
// replies to coordinator requests (PortReserved) and batched LogsReport / MetricsReport
// messages. A heartbeat (OnHeartbeat) is not a metric point: only the newest of each
// rank waits in the batch (MetricsReport.beats, with its age when sent), so a rank's
// beats cost one entry per batch however often it beats. While disconnected, replies, log
// lines and metric points are dropped and counted (the lines are in the rank's log files),
// heartbeats dropped (the next says the same, newer); exits are never held here (the
// Supervisor keeps them as facts until the ReportLedger has them reported).
//
// Threading: thread-safe, one mutex. Producers are the supervisor's output thread (as its
// SupervisorListener) and the agent's reader thread (replies); the single consumer is the
// agent's writer thread, which blocks in WaitForWork() until there is work or its next
// deadline (a heartbeat, a batch's flush) passes on the clock.
class Outbox final : public SupervisorListener {
 public:
  struct Dropped {
    int64_t log_lines = 0;
    int64_t metric_points = 0;
    int64_t replies = 0;
  };

  // `clock` must outlive the Outbox; it times the batches and WaitForWork().
  Outbox(OutboxOptions options, Clock* clock) : options_(options), clock_(clock) {}

  // SupervisorListener.
  void OnLogLine(const std::string& job_id, baton::v1::LogLine line) override;
  void OnMetricPoint(const std::string& job_id, baton::v1::MetricPoint point) override;
  void OnHeartbeat(const std::string& job_id, baton::v1::RankBeat beat, absl::Time read) override;
  void OnReportsPending() override;

  // Queues a reply, sent before anything else.
  void PushReply(baton::v1::WorkerMessage reply);

  // Connection state, set by the agent. Going offline drops (and counts) what is queued.
  void SetConnected(bool connected);

  // Blocks until there is work or the clock reaches `deadline`. Work: a Wake(); while
  // connected, also something to send now (a reply, pending reports, a full batch) and a new
  // batch (NextFlushTime() moved from InfiniteFuture: the writer's deadline changed).
  // Returns whether there is work; clears the Wake() and new-batch flags.
  bool WaitForWork(absl::Time deadline);
  void Wake();

  std::vector<baton::v1::WorkerMessage> TakeReplies();
  // Whether OnReportsPending() was called since the last call; clears the flag.
  bool TakeReportsPending();
  // The batched MetricsReport/LogsReport messages if a batch is due (full, older than
  // flush_interval, or `force`), else nothing. Each message holds at most max_batch_entries
  // entries of one job.
  std::vector<baton::v1::WorkerMessage> TakeBatches(bool force);
  // When the current batch becomes due by age; InfiniteFuture if there is none.
  absl::Time NextFlushTime() const;
  // What was dropped since the last call.
  Dropped TakeDropped();

 private:
  bool BatchFullLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HasWorkLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // False (and counted) if the entry must be dropped.
  bool AdmitLocked(size_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ClearBatchLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const OutboxOptions options_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
  // The current batch started since the last WaitForWork().
  bool batch_started_ ABSL_GUARDED_BY(mu_) = false;
  bool reports_pending_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<baton::v1::WorkerMessage> replies_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<baton::v1::LogLine>> logs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::vector<baton::v1::MetricPoint>> metrics_ ABSL_GUARDED_BY(mu_);
  // Heartbeats: the newest of each rank (by job, then rank) and when it was read.
  struct PendingBeat {
    baton::v1::RankBeat beat;
    absl::Time read;
  };
  std::map<std::string, std::map<int32_t, PendingBeat>> beats_ ABSL_GUARDED_BY(mu_);
  size_t batch_entries_ ABSL_GUARDED_BY(mu_) = 0;
  size_t batch_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time batch_start_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();  // Oldest entry.
  Dropped dropped_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::worker
