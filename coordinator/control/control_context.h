#pragma once

// What the coordinator's managers (RendezvousManager, RecoveryManager, ProfileManager)
// share: the job records and worker sessions they act on, the clock, the options, the
// per-job state that lives only while the coordinator runs, and the effects every manager
// needs: committing a change (or halting when the store failed), sending to a worker,
// stopping a generation's processes, failing a job, refusing a worker's report.

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"
#include "coordinator/control/worker_registry.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/policy/scheduler.h"
#include "coordinator/policy/stall_detector.h"

namespace baton::coordinator {

struct CoordinatorOptions {
  // Interval workers are told to heartbeat at. (How long a silent worker is trusted, its
  // lease, is the WorkerRegistry's.)
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // A job stuck in RENDEZVOUS (port reservation or process start) this long fails.
  absl::Duration rendezvous_timeout = absl::Seconds(60);
  // A straggler left out of a job's next generation (policy/straggler_replacement.h) is
  // not taken back into that job for this long, unless it needs it for workers.min.
  absl::Duration straggler_cooldown = absl::Minutes(10);
  // After a coordinator restart, how long RUNNING jobs wait for their workers to
  // reconnect and report their processes before they fail.
  absl::Duration reattach_timeout = absl::Seconds(30);
  // Grace between SIGTERM and SIGKILL when stopping a job's processes. A connected worker
  // whose processes of a restarting generation have not all exited stop_grace + lease
  // after the failure has its lease revoked (WorkerRegistry::Revoke).
  absl::Duration stop_grace = absl::Seconds(10);
  // A planned resize (drain, scale-up) waits this long for rank 0 to checkpoint and exit
  // before it stops the generation anyway.
  absl::Duration checkpoint_timeout = absl::Seconds(60);
  // OnIdle writes staged reports at most this often: a record staged after a write is
  // copied whole, so a flush per report would cost O(ranks) each. What waits is written
  // by the next OnIdle after the interval or by ReconcileOnce.
  absl::Duration group_commit_interval = absl::Milliseconds(10);
  // Pre-flight (policy/preflight.h): how long a worker's connect to a peer may take, and
  // a worker's answer is awaited for the link window + that + preflight_answer_grace; one
  // that did not answer by then has failed.
  absl::Duration preflight_connect_timeout = absl::Seconds(2);
  absl::Duration preflight_answer_grace = absl::Seconds(3);
  // A host a pre-flight found slow or failing is left out of new gangs this long; then
  // the next gang it joins checks it again.
  absl::Duration unhealthy_recheck_after = absl::Minutes(10);
  // Sharing a cluster (a queue file): the half-life of a user's recorded usage, by which
  // fair share orders the users of a queue (policy/admission.h, DecayUsage).
  absl::Duration fair_share_half_life = absl::Hours(24);
};

// A pre-flight check in progress (RendezvousManager): the generation waits for it before
// its ReservePort.
struct PendingPreflight {
  std::vector<std::string> participants;                      // ring order
  int round = 1;  // 2: confirming hosts round 1 found slow
  std::map<std::string, baton::v1::PreflightResult> results;  // this round's, by worker
  std::map<std::string, baton::v1::PreflightResult> earlier;  // round 1's, in round 2
  absl::Time started;                                         // of round 1
  absl::Time deadline;                                        // for this round's answers
};

// Per-job state that lives only while the coordinator runs (rebuilt after a restart:
// Coordinator::Recover).
struct JobRuntime {
  // RendezvousManager's: when a RENDEZVOUS generation times out.
  absl::Time rendezvous_deadline = absl::InfiniteFuture();
  std::set<std::string> started_workers;  // sent AssignmentStarted this generation
  // Distinct workers of this generation's ranks (WorkersOf), counted once by
  // StartRendezvous so that N AssignmentStarted do not each count them.
  size_t gang_workers = 0;
  // After a coordinator restart: workers that have yet to report this job's processes.
  std::set<std::string> awaiting_workers;
  absl::Time reattach_deadline = absl::InfiniteFuture();
  // Highest MetricPoint.step this generation reported (any rank); unset before the first.
  std::optional<int64_t> last_step;
  // Hang detection; its learned references outlive the generation (ResetForNextGeneration).
  StallDetector stall;
  // Workers left out of the job as stragglers, until when (outlives the generation).
  std::map<std::string, absl::Time> benched;
  // RecoveryManager's: a RESTARTING job whose rank 0 was asked to checkpoint has the
  // generation's processes stopped when any rank exited or at this time. InfiniteFuture:
  // stop already sent.
  absl::Time checkpoint_deadline = absl::InfiniteFuture();
  // RendezvousManager's: this generation's pre-flight, while it runs.
  std::optional<PendingPreflight> preflight;
  // Workers that passed a pre-flight of this job (outlives the generation): a generation
  // whose workers all did starts without one.
  std::set<std::string> preflight_passed;
};

// Forgets `rt`'s generation for the job's next one (starting at `start`), keeping only
// what the job's history taught: the hang detector's learned references, the workers
// left out as stragglers and those that passed a pre-flight.
inline void ResetForNextGeneration(JobRuntime& rt, absl::Time start) {
  StallDetector stall = rt.stall.ForNextGeneration(start);
  std::map<std::string, absl::Time> benched = std::move(rt.benched);
  std::set<std::string> passed = std::move(rt.preflight_passed);
  rt = JobRuntime();
  rt.stall = std::move(stall);
  rt.benched = std::move(benched);
  rt.preflight_passed = std::move(passed);
}

// Durable, then act: a manager commits a change through JobManager and checks it with
// Ok() before sending what the change causes. If the store failed, the context halts: it
// sends nothing more (Send returns false), halted() turns UNAVAILABLE, and the halt
// handler runs once.
//
// Threading: not thread-safe; the coordinator's event loop is its only caller.
class ControlContext {
 public:
  // All pointers must outlive this object.
  ControlContext(JobManager* jobs, WorkerRegistry* workers, const Clock* clock,
                 CoordinatorOptions options);

  JobManager* jobs() const { return jobs_; }
  WorkerRegistry* workers() const { return workers_; }
  const Clock* clock() const { return clock_; }
  const CoordinatorOptions& options() const { return options_; }

  // --- Per-job runtime state ---
  // The job's entry, created empty on first use.
  JobRuntime& Runtime(const std::string& job_id) { return runtime_[job_id]; }
  // The entry if there is one.
  const JobRuntime* FindRuntime(const std::string& job_id) const;
  // Drops the entry (the job ended).
  void ForgetRuntime(const std::string& job_id) { runtime_.erase(job_id); }
  // Ids of the jobs with an entry, in order (a copy: callers may forget entries meanwhile).
  std::vector<std::string> RuntimeJobIds() const;

  // --- Halting ---
  // OK until halted; then UNAVAILABLE with the reason.
  const absl::Status& halted() const { return halted_; }
  // Called once, when the context halts, with the reason.
  void SetHaltHandler(std::function<void(const absl::Status&)> on_halt) {
    on_halt_ = std::move(on_halt);
  }
  // True if a JobManager write succeeded. Otherwise halts if the store failed, else logs
  // and counts the refused change (`what`, a literal naming the change: refused_changes);
  // the caller then abandons the change and its side effects.
  bool Ok(const absl::Status& status, const char* what);
  // Changes refused for a reason other than the store (an illegal transition, a broken
  // invariant: a bug), by `what`. For metrics.
  const std::map<std::string, int64_t>& refused_changes() const { return refused_changes_; }
  // Stops everything (idempotent): see the class comment.
  void Halt(const absl::Status& cause);
  // Stops acting for a shutdown: as halted (entry points UNAVAILABLE, nothing sent or
  // decided), without the halt handler. What the shutdown itself causes (every worker's
  // stream closing) then changes nothing: the next coordinator re-attaches the workers.
  void Quiesce();

  // --- Effects ---
  // WorkerRegistry::Send, unless halted (then false).
  bool Send(const std::string& worker_id, const baton::v1::CoordinatorMessage& msg);
  // StopAssignment of `generation` of `job_id` to the worker, with `grace` (default:
  // options.stop_grace); `keep_waiting`: StopAssignment.keep_waiting_ranks.
  void SendStop(const std::string& worker_id, const std::string& job_id, int64_t generation,
                const std::string& reason, std::optional<absl::Duration> grace = std::nullopt,
                bool keep_waiting = false);
  // SendStop of the job's generation to each of its workers.
  void StopProcesses(const baton::v1::Job& job, const std::string& reason,
                     std::optional<absl::Duration> grace = std::nullopt, bool keep_waiting = false);
  // Fails the job (storing `record` with it if given), stops its processes everywhere and
  // forgets its runtime state. Nothing if it is unknown or already terminal.
  void Fail(const std::string& job_id, const std::string& reason, const std::string& message,
            const baton::v1::Job* record = nullptr);

  // --- Reads ---
  // The job if it exists and `generation` is its current one and it is active.
  const baton::v1::Job* ActiveJob(const std::string& job_id, int64_t generation) const;
  // Rejects (logs) a message about `generation` of `job_id` unless it is current
  // (CheckGeneration); true if rejected or the job is unknown.
  bool Fenced(const std::string& worker_id, const std::string& job_id, int64_t generation,
              const char* what) const;
  // Slots in use per worker by RENDEZVOUS/RUNNING/RESTARTING jobs, except `except_job`'s.
  std::map<std::string, int> UsedSlots(const std::string& except_job = "") const;
  // READY workers with their free slots (UsedSlots(except_job) subtracted), but those
  // marked unhealthy (WorkerRegistry::MarkUnhealthy) or cordoned.
  std::vector<WorkerCapacity> FreeCapacity(const std::string& except_job = "") const;

  // --- Refused reports ---
  // A worker's report of `kind` about an assignment not its own: counted, and logged with
  // `why` the first time per worker and kind (at most kMaxRefusalLogKeys pairs are
  // remembered; past that, refusals are only counted).
  void RefuseReport(const std::string& worker_id, const std::string& kind, const std::string& why);
  // Refusals by kind: "logs", "metrics", "assignment_started", "assignment_failed",
  // "process_exited", "port_reserved", "profile_trace".
  const std::map<std::string, int64_t>& refused_reports() const { return refused_reports_; }
  static constexpr size_t kMaxRefusalLogKeys = 4096;

 private:
  JobManager* const jobs_;
  WorkerRegistry* const workers_;
  const Clock* const clock_;
  const CoordinatorOptions options_;
  std::map<std::string, JobRuntime> runtime_;  // by job id
  absl::Status halted_;
  std::function<void(const absl::Status&)> on_halt_;
  std::map<std::string, int64_t> refused_changes_;                 // by what
  std::map<std::string, int64_t> refused_reports_;                 // by kind
  std::set<std::pair<std::string, std::string>> refusals_logged_;  // (worker, kind)
};

// Generation fencing. OK if `generation` is the job's current one; ABORTED if it is older
// (the sender's processes belong to a superseded generation and must stop);
// FAILED_PRECONDITION if it is newer (the coordinator never issued it).
absl::Status CheckGeneration(const baton::v1::Job& job, int64_t generation);

}  // namespace baton::coordinator
