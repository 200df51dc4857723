#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "coordinator/goodput.h"
#include "coordinator/job_state.h"
#include "coordinator/slowdown.h"
#include "coordinator/store/store.h"
#include "coordinator/stream_sink.h"
#include "proto/baton/v1/job.pb.h"
#include "proto/baton/v1/job_service.pb.h"

namespace baton::coordinator {

using UpdateSink = StreamSink<baton::v1::JobUpdate>;
using LogSink = StreamSink<baton::v1::LogLine>;

struct JobManagerOptions {
  // Straggler events (coordinator/slowdown.h): a rank whose slowdown ratio stays above
  // `straggler_threshold` for `slowdown_window` consecutive metric points of its own.
  int slowdown_window = kDefaultSlowdownWindow;
  double straggler_threshold = kDefaultStragglerThreshold;
};

// Owns every job: its record, its state machine, its history (events and metric points,
// numbered per job), its log lines, and the streams watching it. Every change is written
// to the Store before the method returns, so a crash loses nothing acknowledged.
//
// Knows nothing of workers or gRPC; the Coordinator drives it.
// Threading: not thread-safe. All calls come from one thread (the coordinator's event
// loop). Sinks are thread-safe and never block, so pushing to them here is fine.
class JobManager {
 public:
  // `store` and `clock` must outlive this object.
  JobManager(Store* store, const Clock* clock, JobManagerOptions options = {});

  // Loads every job from the store. Call once, before anything else. For each job that has
  // started and not ended it replays the recorded metric points, to rebuild the productive
  // step time (goodput) and the straggler state.
  absl::Status Load();

  // Applies defaults, validates (INVALID_ARGUMENT naming the field), assigns an id and
  // records the job as QUEUED with a "Submitted" event.
  absl::StatusOr<baton::v1::Job> Submit(baton::v1::JobSpec spec);

  // The job with its events and an up-to-date result. NOT_FOUND for unknown ids.
  absl::StatusOr<baton::v1::Job> Get(const std::string& job_id) const;
  // Jobs, newest first, without events; only `states` if non-empty; at most `limit` (0: all).
  std::vector<baton::v1::Job> List(const std::vector<baton::v1::JobState>& states,
                                   int limit) const;

  // Current state. NOT_FOUND for unknown ids.
  absl::StatusOr<JobState> State(const std::string& job_id) const;
  // Ids of jobs in any of `states`, in submission order.
  std::vector<std::string> JobsIn(const std::vector<JobState>& states) const;

  // Read-only access to a job's record (without events); nullptr for unknown ids. Valid
  // until the next Submit().
  const baton::v1::Job* Peek(const std::string& job_id) const;
  // Mutable access to a job's record (ranks, generation, rendezvous endpoint) for the
  // Coordinator; call Save() after changing it. nullptr for unknown ids. The pointer is
  // valid until the next Submit().
  baton::v1::Job* Mutable(const std::string& job_id);
  // Persists the record after a Mutable() change.
  absl::Status Save(const std::string& job_id);

  // Moves the job to `to` through the checked state machine and records an event with
  // `reason`/`message` (message also becomes Job.message). Sets start/end times; entering a
  // terminal state freezes result.wall_time and result.goodput at the end time.
  // FAILED_PRECONDITION for illegal transitions, NOT_FOUND for unknown jobs.
  absl::Status Transition(const std::string& job_id, JobState to, const std::string& reason,
                          const std::string& message);
  // Records a non-state event (e.g. "RankExited").
  absl::Status RecordEvent(const std::string& job_id, const std::string& reason,
                           const std::string& message);

  // Records metric points (the caller filtered them to the current generation) and
  // updates Job.result from rank 0's points (steps, final_metrics, initial_loss, and the
  // productive step time behind result.goodput; see coordinator/goodput.h). Records a
  // "Straggler" event (after the points) the first time a rank of a generation is found
  // to straggle (coordinator/slowdown.h), naming the rank and its slowdown ratio.
  absl::Status AddMetrics(const std::string& job_id,
                          const std::vector<baton::v1::MetricPoint>& points);
  // Numbers and records log lines.
  absl::Status AddLogs(const std::string& job_id, std::vector<baton::v1::LogLine> lines);

  // Streams a snapshot, then every update with seq > after_seq, then live updates until
  // the job is terminal (then Finish(OK)). NOT_FOUND for unknown jobs.
  absl::Status Watch(const std::string& job_id, int64_t after_seq,
                     std::shared_ptr<UpdateSink> sink);
  // Streams log lines with seq > after_seq of `rank` (all if < 0); with `follow`, live
  // lines until the job is terminal.
  absl::Status FollowLogs(const std::string& job_id, int32_t rank, int64_t after_seq,
                          bool follow, std::shared_ptr<LogSink> sink);

 private:
  struct LogFollower {
    int32_t rank;
    std::shared_ptr<LogSink> sink;
  };
  struct Record {
    baton::v1::Job job;  // without events
    JobState state = JobState::kQueued;
    int64_t last_seq = 0;
    int64_t last_log_seq = 0;
    // Folded from every recorded metric point (rebuilt from the store by Load() for jobs
    // that have not ended; an ended job keeps its persisted result.goodput).
    ProductiveTime productive;
    // Fed every recorded metric point (replayed by Load() like `productive`, so a restarted
    // coordinator does not report a straggler twice).
    StragglerDetector stragglers;
    std::vector<std::shared_ptr<UpdateSink>> watchers;
    std::vector<LogFollower> log_followers;
  };

  absl::StatusOr<Record*> Find(const std::string& job_id);
  absl::StatusOr<const Record*> Find(const std::string& job_id) const;
  // Records an event as the next update and pushes it (and, for state changes, a fresh
  // snapshot) to the watchers.
  absl::Status AppendEvent(Record& r, baton::v1::JobEvent event);
  // The job as clients see it: result.wall_time and result.goodput evaluated now unless
  // the job ended (then they are the values frozen at its end).
  baton::v1::Job View(const Record& r) const;
  // result.goodput of the job at `now` (0 while undefined: not started, no wall time).
  static double Goodput(const Record& r, absl::Time now);
  void PushToWatchers(Record& r, const baton::v1::JobUpdate& update);
  // Ends every stream of a terminal job.
  void FinishStreams(Record& r);

  // An empty record with this manager's options.
  Record NewRecord() const;

  Store* const store_;
  const Clock* const clock_;
  const JobManagerOptions options_;
  std::map<std::string, Record> jobs_;  // by id; ids sort in submission order
  int64_t next_job_number_ = 1;
};

}  // namespace baton::coordinator
