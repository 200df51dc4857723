#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"
#include "common/time/clock.h"
#include "coordinator/jobs/job_state.h"
#include "coordinator/jobs/job_streams.h"
#include "coordinator/jobs/stream_sink.h"
#include "coordinator/policy/goodput.h"
#include "coordinator/policy/slowdown.h"
#include "coordinator/store/store.h"

namespace baton::coordinator {


// How much history the coordinator keeps (see JobManager::Prune).
struct RetentionOptions {
  // Metric points and log lines older than this are deleted.
  absl::Duration history_max_age = absl::Hours(24 * 7);
  // Per job: the newest metric points kept, and the newest log lines kept up to this many
  // bytes of text (0: no limit).
  int64_t max_points_per_job = 100'000;
  int64_t max_log_bytes_per_job = int64_t{50} << 20;
  // A finished job (its row, events, points and logs) is deleted this long after it ended
  // (InfiniteDuration: never).
  absl::Duration job_retention = absl::Hours(24 * 30);
  // Each job's history is pruned at most this often.
  absl::Duration prune_interval = absl::Minutes(1);
};

struct JobManagerOptions {
  // Straggler events (coordinator/policy/slowdown.h): a rank whose slowdown ratio stays above
  // `straggler_threshold` for `slowdown_window` consecutive metric points of its own.
  int slowdown_window = kDefaultSlowdownWindow;
  double straggler_threshold = kDefaultStragglerThreshold;
  RetentionOptions retention;
  // Jobs one owner may have that have not ended (QUEUED through RESTARTING); a Submit past
  // it is RESOURCE_EXHAUSTED. 0: no limit.
  int max_active_jobs_per_owner = 0;
};

// A non-state event (reason and message) for JobManager::Update.
inline baton::v1::JobEvent NewEvent(const std::string& reason, const std::string& message) {
  baton::v1::JobEvent event;
  event.set_reason(reason);
  event.set_message(message);
  return event;
}

// Orders job ids as numbers: "j-999999" < "j-1000000" (ids grow past six digits).
struct JobIdLess {
  bool operator()(const std::string& a, const std::string& b) const {
    return a.size() != b.size() ? a.size() < b.size() : a < b;
  }
};

// Owns every job: its record, its state machine, its history (events and metric points,
// numbered per job), its log lines, and the streams watching it.
//
// Durable, then visible: every change is one Store transaction (the job's row with the
// events it causes), committed before memory changes and before any watcher hears of it.
// The one exception is staging (Stage, AddMetrics): ranks' reports, held back so that N
// ranks' reports cost one transaction, not N (a group commit, whenever the event loop
// runs dry); clients still see them only once written.
// A write that fails changes nothing here, and latches: every later write fails too
// (UNAVAILABLE, naming the first error), since the coordinator must stop and recover from
// disk rather than run ahead of it (store_error()).
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
  // records the job as QUEUED with a "Submitted" event: one transaction with the next job
  // number. With a `request_id` that created a job before, returns that job instead
  // (ALREADY_EXISTS if its spec or owner differs from this one after defaults). `owner`:
  // the submitting user, recorded in Job.owner. RESOURCE_EXHAUSTED, naming the limit and its
  // flag, when `owner` already has max_active_jobs_per_owner jobs that have not ended (a
  // retry of a submit that created its job is still answered with that job).
  // `queueing`: on a coordinator with queues, the job's resolved queue and priority
  // (stored as Job.queueing; nothing when its queue is empty).
  absl::StatusOr<baton::v1::Job> Submit(baton::v1::JobSpec spec, const std::string& request_id = "",
                                        const std::string& owner = "",
                                        const baton::v1::JobQueueing& queueing = {});

  // The job with its events and an up-to-date result. NOT_FOUND for unknown ids.
  absl::StatusOr<baton::v1::Job> Get(const std::string& job_id) const;
  // As Get, without the events (which Get reads from the store): what answers that only
  // need the job itself (submit, cancel, an access check) send.
  absl::StatusOr<baton::v1::Job> GetWithoutEvents(const std::string& job_id) const;
  // Jobs, newest first, without events; only `states` if non-empty; at most `limit` (0: all);
  // only jobs older than `before_id` if it is non-empty (the last id of a previous page: the
  // listing continues there even if that job is gone).
  std::vector<baton::v1::Job> List(const std::vector<baton::v1::JobState>& states, int limit,
                                   const std::string& before_id = "") const;

  // Current state. NOT_FOUND for unknown ids.
  absl::StatusOr<JobState> State(const std::string& job_id) const;
  // Ids of jobs in any of `states`, in submission order.
  std::vector<std::string> JobsIn(const std::vector<JobState>& states) const;

  // Read-only access to a job's record (without events), staged changes included (see
  // Stage); nullptr for unknown ids. The pointer is valid until the job is deleted (Prune);
  // what it points to changes with every Stage/Update/Transition of the job, so copy the
  // record to build a change on it.
  const baton::v1::Job* Peek(const std::string& job_id) const;
  // As Peek, without staged changes: the record as written, what a restarted coordinator
  // would load.
  const baton::v1::Job* PeekWritten(const std::string& job_id) const;

  // Records a new version of a job's record (ranks, generation, restarts, ...): `job` is
  // the whole record (a copy of Peek's, changed), named by its id, in the job's current
  // state (FAILED_PRECONDITION otherwise: states change through Transition). `events`
  // (reason and message set; time and generation are filled in) are recorded after it in
  // the same transaction. NOT_FOUND for unknown jobs.
  absl::Status Update(const baton::v1::Job& job, std::vector<baton::v1::JobEvent> events = {});

  // Moves the job to `to` through the checked state machine and records an event with
  // `reason`/`message` (message also becomes Job.message), with `record` (the job's new
  // record, as for Update; default: the current one) in the same transaction. Sets start/end
  // times; entering a terminal state freezes result.wall_time and result.goodput at the end
  // time and ends the job's streams. FAILED_PRECONDITION for illegal transitions (nothing
  // is written), NOT_FOUND for unknown jobs.
  absl::Status Transition(const std::string& job_id, JobState to, const std::string& reason,
                          const std::string& message, const baton::v1::Job* record = nullptr);
  // Records a non-state event (e.g. "RankExited").
  absl::Status RecordEvent(const std::string& job_id, const std::string& reason,
                           const std::string& message);

  // Changes a job's record without writing it yet, for facts that a coordinator restart
  // re-learns (the pids and exits its workers report again when they re-register), where a
  // write per report would cost a durable transaction per rank. `mutate` edits the record
  // in place (it may not change the id or the state: FAILED_PRECONDITION, and they are put
  // back);
  // `events` (reason and message set) get their time now and are recorded when the change
  // is written. The change shows in Peek at once; clients (Get, List, Watch) see it once
  // written: by Flush, or first thing in the job's next Update or Transition (same
  // transaction) or RecordEvent. Lost if the coordinator stops before then.
  // NOT_FOUND for unknown jobs.
  absl::Status Stage(const std::string& job_id, absl::FunctionRef<void(baton::v1::Job&)> mutate,
                     std::vector<baton::v1::JobEvent> events = {});
  // Writes every staged change, all jobs in one transaction (a failure latches like any
  // write, and the changes stay staged). The coordinator calls it whenever its event loop
  // runs out of work, so a burst of reports costs one transaction.
  absl::Status Flush();
  // Jobs with staged changes not yet written.
  size_t staged_jobs() const { return staged_.size(); }

  // Applies RetentionOptions to at most `max_jobs` jobs whose last prune is
  // prune_interval old (round robin): deletes finished jobs past job_retention (they
  // vanish from listings; their request ids are forgotten) and prunes the others' metric
  // points and log lines (Store::Prune; events are kept). A job whose points were pruned
  // keeps its result; after a coordinator restart its goodput and straggler state are
  // rebuilt from the points kept. Each prune is its own transaction; a failure latches
  // like any write.
  absl::Status Prune(int max_jobs);
  // Small durable values beside the jobs (Store's meta; the coordinator's own keys, never
  // the store's schema version): ReadMeta is NOT_FOUND for a missing key; WriteMeta is
  // durable on return, and a failure latches like any write.
  absl::StatusOr<std::string> ReadMeta(const std::string& key) const;
  absl::Status WriteMeta(const std::string& key, const std::string& value);
  // Bytes the state occupies on disk (Store::DiskBytes).
  absl::StatusOr<int64_t> StateBytes() const { return store_->DiskBytes(); }

  // Store transactions this manager committed (each one fsync of the write-ahead log) and
  // the time they took, since it was made: what the coordinator's metrics export.
  struct CommitStats {
    int64_t commits = 0;
    int64_t failed = 0;
    absl::Duration time;
  };
  const CommitStats& commit_stats() const { return commit_stats_; }

  // OK until a store write failed; then that failure (the coordinator must stop).
  const absl::Status& store_error() const { return store_error_; }

  // Records metric points (the caller filtered them to the current generation) and
  // updates Job.result from rank 0's points (steps, final_metrics, initial_loss, and the
  // productive step time behind result.goodput; see coordinator/policy/goodput.h). Records a
  // "Straggler" event (after the points) the first time a rank of a generation is found
  // to straggle (coordinator/policy/slowdown.h), naming the rank and its slowdown ratio.
  // Staged like Stage's changes (a report per rank per period would otherwise cost a
  // transaction each): the points and the new result are written, and streamed, by the
  // next Flush, Update or Transition; the goodput and straggler accumulators advance at
  // once (a restarted coordinator rebuilds them from the points written).
  absl::Status AddMetrics(const std::string& job_id,
                          const std::vector<baton::v1::MetricPoint>& points);
  // Numbers and records log lines.
  absl::Status AddLogs(const std::string& job_id, std::vector<baton::v1::LogLine> lines);

  // Streams a snapshot, then every update with seq > after_seq, then live updates until
  // the job is terminal (then Finish(OK)); history goes a page at a time as the client
  // reads (see JobStreams; PumpStreams sends more). NOT_FOUND for unknown jobs.
  // `events_only`: job events and snapshots, no metric points (what the coordinator's
  // own metrics follow).
  absl::Status Watch(const std::string& job_id, int64_t after_seq,
                     std::shared_ptr<UpdateSink> sink, bool events_only = false);
  // The job's goodput ratio now (policy/goodput.h over the productive time the manager
  // folds from its metric points); nullopt while undefined or for unknown ids.
  std::optional<double> GoodputRatioNow(const std::string& job_id) const;
  // Its ranks' slowdown ratios in the newest generation (policy/slowdown.h, over the same
  // window as straggler detection); empty for unknown ids.
  std::map<int32_t, double> SlowdownRatios(const std::string& job_id) const;
  // Its ranks that straggle now in the newest generation (StragglerDetector::Persistent),
  // with their slowdown ratios; empty for unknown ids.
  std::map<int32_t, double> Stragglers(const std::string& job_id) const;
  const JobManagerOptions& options() const { return options_; }
  // Streams the log lines `query` selects (JobStreams::Follow); with `query.follow`, live
  // lines until the job is terminal. NOT_FOUND for unknown jobs.
  absl::Status FollowLogs(const std::string& job_id, const LogQuery& query,
                          std::shared_ptr<LogSink> sink);
  // Sends more history to streams catching up (JobStreams::Pump). The reconcile calls it.
  void PumpStreams() { streams_.Pump(); }

 private:
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
    absl::Time next_prune = absl::InfinitePast();
    // Staged (Stage, AddMetrics) and not yet written: the record with the changes (none if
    // only updates are staged) and the updates, events and metric points in order (seq
    // assigned when written). The job is in staged_ iff either is there.
    std::optional<baton::v1::Job> staged;
    std::vector<baton::v1::JobUpdate> staged_updates;
  };

  absl::StatusOr<Record*> Find(const std::string& job_id);
  absl::StatusOr<const Record*> Find(const std::string& job_id) const;
  // The job as clients see it: result.wall_time and result.goodput evaluated now unless
  // the job ended (then they are the values frozen at its end).
  baton::v1::Job View(const Record& r) const;
  // result.goodput of `job` at `now` (0 while undefined: not started, no wall time).
  static double Goodput(const ProductiveTime& productive, const baton::v1::Job& job,
                        absl::Time now);

  // An empty record with this manager's options.
  Record NewRecord() const;
  // The update recording `event` as the seq-th of a job whose record is `job`: time now,
  // the job's generation.
  baton::v1::JobUpdate EventUpdate(int64_t seq, baton::v1::JobEvent event,
                                   const baton::v1::Job& job) const;
  // The record with its staged changes, if any.
  static const baton::v1::Job& Current(const Record& r) {
    return r.staged.has_value() ? *r.staged : r.job;
  }
  // Takes r's staged updates, numbered from r.last_seq + 1 + updates->size() (appended to
  // `updates`), and forgets the staged record: the caller writes a record built on it.
  void TakeStaged(Record& r, std::vector<baton::v1::JobUpdate>* updates);
  // Commits `batch` (see the class comment: a failure latches); then installs `job` (when
  // given; nullopt: the record is unchanged) as r's record, appends `updates` (which
  // `batch` holds) to its history and pushes them to the watchers, with a fresh snapshot
  // after a state change.
  absl::Status Commit(Record& r, WriteBatch batch, std::optional<baton::v1::Job> job,
                      std::vector<baton::v1::JobUpdate> updates);
  // Store::Write with the latch.
  absl::Status Write(const WriteBatch& batch);

  Store* const store_;
  const Clock* const clock_;
  const JobManagerOptions options_;
  std::map<std::string, Record, JobIdLess> jobs_;  // by id: submission order
  std::map<std::string, std::string> by_request_id_;  // SubmitJob request_id -> job id
  int64_t next_job_number_ = 1;
  absl::Status store_error_;
  CommitStats commit_stats_;
  std::string prune_cursor_;  // the last job Prune() visited
  std::set<std::string> staged_;  // ids of jobs with staged changes
  JobStreams streams_;
};

}  // namespace baton::coordinator
