#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"
#include "coordinator/control/profile_table.h"
#include "coordinator/policy/profile_plan.h"
#include "coordinator/policy/recovery.h"
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
};

// The coordinator's brain: gang scheduling, rendezvous, supervision of running jobs,
// cancellation and reconciliation after its own restart. Drives JobManager (job
// records) and WorkerRegistry (worker sessions); talks to workers only through
// WorkerRegistry::Send.
//
// Rendezvous of a job (generation g): pick workers (Schedule) and ranks (AssignRanks),
// go RENDEZVOUS, ask rank 0's worker for a free port (ReservePort), then send every
// worker its StartAssignment with MASTER_ADDR/PORT; RUNNING once every worker reported
// AssignmentStarted. SUCCEEDED when every rank exited 0.
//
// Recovery: the first failure of generation g (a rank exited non-zero or was killed:
// class user; a worker holding live ranks was lost, its lease expired, it came back
// without them, or it could not reach a peer: class infra; no rank made progress for the
// stall timeout, see StallDetector: class stall) moves a RENDEZVOUS/RUNNING job to
// RESTARTING, recorded as a Failure in Job.restarts, and stops g's processes on every
// worker. Two generations never run at the same time: g+1 starts only once every process
// of g reported its exit or its worker is lost and its lease has certainly expired
// (WorkerRegistry::ProcessesStopped); a connected worker whose processes do not stop
// within stop_grace + lease has its lease revoked. Once they all stopped and the backoff
// of the spec's RestartPolicy elapsed, generation g+1 re-rendezvouses on workers.min..max READY
// workers (PlaceRestart: survivors keep their ranks) with a fresh MASTER_PORT; if fewer
// than min are available for rendezvous_timeout the job FAILS. The job FAILS at once
// instead of restarting when the class's budget is spent ("RestartBudgetExhausted") or
// a user failure happens at the same step as the previous one ("CrashLoop"). Restart
// timing is derived from the stored Job, so it survives a coordinator restart.
//
// Planned resizes (class PLANNED: no budget, no backoff): a worker that drains (Draining,
// or Register.draining) gets no new work and every active job with ranks on it resizes; a
// RUNNING job that checkpoints on request (CheckpointsOnRequest: the built-in trainer, or a
// command job with command.elastic) below workers.max resizes when a READY worker with
// enough free slots is left over after scheduling the queue (scale-up, once the generation
// reported a step). Such a RUNNING job resizes by asking rank 0 to checkpoint at its next
// step boundary (RequestCheckpoint) and stopping the other processes once any rank exited
// (or checkpoint_timeout passed); anything else is stopped at once. The next generation is
// placed like any restart, so it loses the draining worker or gains the new ones.
//
// Fencing: worker messages about an older generation than the job's current one are
// rejected (CheckGeneration: ABORTED, logged; a stale AssignmentStarted also gets a
// StopAssignment for its generation). The stream has no per-message reply, so the
// status is not sent back.
//
// Durable, then act: every decision is committed through JobManager (one transaction per
// change) before the messages it causes are sent. If a commit fails because the store
// failed, the coordinator halts: it sends nothing more, every entry point answers
// UNAVAILABLE or does nothing, and the halt handler runs once (the daemon stops serving and
// exits; a restart recovers from disk). A change refused for another reason (a broken
// invariant, such as an illegal transition) is abandoned whole and logged.
//
// The methods live in five files by flow: coordinator.cc (entry points, worker sessions,
// the reconcile, sending), coordinator_rendezvous.cc (scheduling, rendezvous, process
// starts and exits), coordinator_recovery.cc (failures, resizes, restarts),
// coordinator_reports.cc (workers' log lines and metric points, refused when not their own)
// and coordinator_profile.cc (`baton profile`: ProfileJob, ProfileTrace, their checks).
//
// Threading: not thread-safe. Every method is called from one thread (the event loop);
// nothing here blocks on the network (sends are queued).
class Coordinator {
 public:
  // All pointers must outlive this object. `jobs` must already be Load()ed.
  Coordinator(JobManager* jobs, WorkerRegistry* workers, const Clock* clock,
              CoordinatorOptions options);

  // Reconciles jobs recovered from the store: RENDEZVOUS ones go back to QUEUED, RUNNING
  // ones wait up to reattach_timeout for their workers to report back.
  absl::Status Recover();

  // Called once, when the coordinator halts (see the class comment), with the reason.
  void SetHaltHandler(std::function<void(const absl::Status&)> on_halt) {
    on_halt_ = std::move(on_halt);
  }
  // OK until halted; then UNAVAILABLE with the reason.
  const absl::Status& halted() const { return halted_; }

  // --- JobService ---
  // See JobManager::Submit (`request_id` makes it idempotent).
  absl::StatusOr<baton::v1::Job> SubmitJob(baton::v1::JobSpec spec,
                                           const std::string& request_id = "",
                                           const std::string& owner = "");
  // FAILED_PRECONDITION if the job is already terminal; NOT_FOUND if unknown.
  absl::StatusOr<baton::v1::Job> CancelJob(const std::string& job_id,
                                           const std::string& reason);
  // Workers with used_slots and job_ids filled in.
  std::vector<baton::v1::Worker> ListWorkers() const;
  // `baton profile` (JobService.ProfileJob, coordinator_profile.cc): validates the request,
  // sends ProfileRanks to the workers of the asked ranks and returns OK; `done` is then
  // called exactly once, later, with every rank's trace or the failure (ProfileTable's
  // contract; also UNAVAILABLE if the generation ends or a worker of a missing rank is
  // lost, checked each reconcile). On an error returned here `done` is never called:
  // INVALID_ARGUMENT (steps outside [1, kMaxProfileSteps], a rank outside [0, world), a
  // timeout outside (0, kMaxProfileTimeout]), NOT_FOUND, FAILED_PRECONDITION (not RUNNING,
  // a command job, no step reported yet by this generation, a worker older than protocol
  // version 4), RESOURCE_EXHAUSTED (the table is full), UNAVAILABLE (halted, or a worker
  // is not connected).
  absl::Status ProfileJob(const baton::v1::ProfileJobRequest& request, ProfileTable::Done done);
  // Profiles in flight (for tests and metrics).
  size_t profiles_in_flight() const { return profiles_.size(); }
  // Worker reports refused because they were about an assignment this coordinator did not
  // give that worker in the job's current generation (a worker speaks only for its own
  // ranks), by kind: "logs", "metrics", "assignment_started", "assignment_failed",
  // "process_exited", "port_reserved", "profile_trace". For metrics.
  const std::map<std::string, int64_t>& refused_reports() const { return refused_reports_; }

  // --- WorkerService stream ---
  // A worker's first message. FAILED_PRECONDITION for an unsupported protocol version,
  // INVALID_ARGUMENT for an empty worker id or fewer than 1 slot. Returns the session id
  // for later calls.
  absl::StatusOr<uint64_t> OnWorkerConnected(const baton::v1::Register& reg,
                                             const std::string& peer_host,
                                             std::shared_ptr<WorkerChannel> channel);
  // Any later message of that session (ignored if the session was superseded).
  void OnWorkerMessage(const std::string& worker_id, uint64_t session,
                       const baton::v1::WorkerMessage& msg);
  // The worker is leaving (it sent Draining): see "Planned resizes" above.
  void OnWorkerDraining(const std::string& worker_id, const std::string& reason);
  // The session's stream ended.
  void OnWorkerDisconnected(const std::string& worker_id, uint64_t session);

  // One pass of the control loop: expire heartbeats, time out rendezvous and
  // re-attachment, restart RESTARTING jobs whose backoff elapsed, schedule queued jobs.
  // Idempotent; the daemon calls it on a timer and after every event that may unblock
  // work; tests call it directly.
  void ReconcileOnce();
  // Writes the facts staged by worker reports (ranks' pids and exits, metric points;
  // JobManager::Stage, AddMetrics): one transaction for all of them. ReconcileOnce calls it
  // first; tests call it directly.
  void FlushStaged();
  // The daemon's event loop ran out of queued work: FlushStaged, unless it ran less than
  // group_commit_interval ago.
  void OnIdle();

  // Generation fencing. OK if `generation` is the job's current one; ABORTED if it is
  // older (the sender's processes belong to a superseded generation and must stop);
  // FAILED_PRECONDITION if it is newer (the coordinator never issued it).
  static absl::Status CheckGeneration(const baton::v1::Job& job, int64_t generation);

 private:
  // Per-job state that lives only while the coordinator runs.
  struct Runtime {
    absl::Time rendezvous_deadline = absl::InfiniteFuture();
    std::set<std::string> started_workers;  // sent AssignmentStarted this generation
    // Distinct workers of this generation's ranks (WorkersOf), counted once by
    // StartRendezvous so that N AssignmentStarted do not each count them.
    size_t gang_workers = 0;
    // After a restart: workers that have yet to report this job's processes.
    std::set<std::string> awaiting_workers;
    absl::Time reattach_deadline = absl::InfiniteFuture();
    // Highest MetricPoint.step this generation reported (any rank); unset before the first.
    std::optional<int64_t> last_step;
    // Stall detection, for generations that report steps.
    StallDetector stall;
    // A RESTARTING job whose rank 0 was asked to checkpoint: the generation's processes
    // are stopped when any rank exited or at this time. InfiniteFuture: stop already sent.
    absl::Time checkpoint_deadline = absl::InfiniteFuture();
  };

  // `reason`: "WorkerLost" (stream closed) or "LeaseExpired"; `occurred`: when the loss
  // happened (last heartbeat, or now for a closed stream).
  void HandleWorkerLost(const std::string& worker_id, const std::string& reason,
                        const std::string& why, absl::Time occurred);
  // A worker could not carry out a ReservePort or a StartAssignment, or it stopped one
  // before its processes started (AssignmentFailed): an active generation fails (class
  // infra); a restarting one counts the ranks that never started as stopped. A refusal of
  // the spec's paths or data (ASSIGNMENT_FAILURE_PATH_NOT_ALLOWED, _DATA_NOT_FOUND) is a user error: the job fails, with the worker's
  // message as its cause.
  void OnAssignmentFailed(const std::string& worker_id, const baton::v1::AssignmentFailed& msg);
  // Records an exit (code -1, now) for every rank of the generation `msg` names that never
  // started: those of `worker_id`, or every rank if no StartAssignment was sent yet (a
  // ReservePort failed). Returns false if the store failed.
  bool RecordRanksNotStarted(const std::string& worker_id, const baton::v1::AssignmentFailed& msg);
  void ReattachAssignments(const std::string& worker_id, const baton::v1::Register& reg);
  // Active jobs that count on a reconnected worker that did not report them (it restarted
  // and their processes are gone) fail their generation.
  void FailJobsWithoutProcesses(const std::string& worker_id,
                                const std::set<std::string>& reported);
  // Ranks of restarting jobs on a reconnected worker that did not list them ended.
  void ForgetStoppedRanks(const std::string& worker_id, const std::set<std::string>& listed);
  void OnMetrics(const std::string& worker_id, const baton::v1::MetricsReport& m);
  // Adds the report's lines of the job's current generation whose rank runs on the worker;
  // others are refused (RefuseReport), older generations' dropped.
  void OnLogs(const std::string& worker_id, const baton::v1::LogsReport& l);
  // A worker's ProfileTrace: into the table (a stale or foreign one is logged, dropped).
  void OnProfileTrace(const std::string& worker_id, const baton::v1::ProfileTrace& trace);
  // Each reconcile: expires profiles past their deadline and fails those whose generation
  // is no longer RUNNING or whose missing ranks' worker is not connected.
  void CheckProfiles();
  void Schedule();
  // Starts the next generation of `job` (its current record, possibly changed by the
  // caller; stored with the transition). `reason` is the event's reason ("Scheduled",
  // "Restarted").
  void StartRendezvous(baton::v1::Job job, const std::vector<std::string>& worker_ids,
                       const std::string& reason);
  void OnPortReserved(const std::string& worker_id, const baton::v1::PortReserved& msg);
  void OnAssignmentStarted(const std::string& worker_id,
                           const baton::v1::AssignmentStarted& msg);
  void OnProcessExited(const std::string& worker_id, const std::string& job_id,
                       int64_t generation, int32_t rank, const baton::v1::ProcessExit& exit);
  // Fails the job (storing `record` with it if given) and stops its processes everywhere.
  void Fail(const std::string& job_id, const std::string& reason, const std::string& message,
            const baton::v1::Job* record = nullptr);
  // A failure of the current generation of a RENDEZVOUS/RUNNING job: records it and either
  // restarts (RESTARTING, processes stopped) or fails the job (budget spent, crash loop).
  // `rank` is the failed rank if known.
  void FailGeneration(const std::string& job_id, baton::v1::FailureClass failure_class,
                      const std::string& reason, const std::string& cause,
                      std::optional<int32_t> rank, const std::string& worker_id,
                      absl::Time occurred = absl::InfinitePast());
  // A planned resize of an active job (class PLANNED; see the class comment): records it,
  // goes RESTARTING and asks rank 0 for a checkpoint or stops the processes. `reason` is
  // the transition's reason ("Draining", "ScalingUp").
  void Resize(const std::string& job_id, const std::string& reason, const std::string& cause,
              const std::string& worker_id);
  // A Failure record of the job's current generation: class, reason, cause, rank and worker as
  // given, the generation's highest reported step, fail_time now, occurred_time
  // `occurred` (not after now; unset if InfinitePast).
  baton::v1::Failure NewFailure(const baton::v1::Job& job, const Runtime& rt,
                                baton::v1::FailureClass failure_class,
                                const std::string& reason, const std::string& cause,
                                std::optional<int32_t> rank,
                                const std::string& worker_id, absl::Time occurred) const;
  // Resizes the active jobs that have ranks on a draining worker.
  void MoveJobsOff(const std::string& worker_id, const std::string& why);
  // Resizes RUNNING jobs that checkpoint on request (trainer, elastic command) below
  // workers.max that free READY workers could join.
  void MaybeScaleUp();
  // For a RESTARTING job: notes when its old processes stopped, and once they did and the
  // backoff elapsed, starts the next generation's rendezvous (or fails the job when too
  // few workers came within rendezvous_timeout).
  void MaybeRestart(const std::string& job_id);
  // For a RESTARTING job whose rank 0 was asked to checkpoint: false while that wait goes
  // on; once it ends (an exit, or checkpoint_timeout) stops the processes, true.
  bool AwaitCheckpoint(const baton::v1::Job& job, bool all_stopped);
  // How long after failure `f` its generation's processes may take to stop before the
  // unstopped ones' leases are revoked: stop_grace + the lease, plus checkpoint_timeout for
  // a planned resize.
  absl::Duration StopWait(const baton::v1::Failure& f) const;
  // True if every process of the job's current generation is stopped: its exit arrived, or
  // its worker is lost and the lease has certainly expired (WorkerRegistry). Raises
  // `lease_expired` to the latest such expiry (complete only when it returns true: it stops
  // at the first process still running).
  bool GenerationStopped(const baton::v1::Job& job, absl::Time* lease_expired) const;
  // The facts DecideStop (policy/recovery.h) decides on: each rank of `job`'s stopping
  // generation and its worker.
  StopFacts StopFactsOf(const baton::v1::Job& job, absl::Time failed_at,
                        absl::Duration stop_wait) const;
  // Revokes the lease of `rank`'s worker (DecideStop said so), with an event naming the
  // rank; false if the event could not be stored (the coordinator halts).
  bool RevokeLease(const baton::v1::Job& job, const StoppingRank& rank, absl::Duration waited);
  // Rejects (logs) a message about `generation` of `job_id` unless it is current; true if
  // rejected or the job is unknown.
  bool Fenced(const std::string& worker_id, const std::string& job_id, int64_t generation,
              const char* what);
  // A failed exit of the failing generation that the workers' clocks place before the
  // recorded failure (e.g. the killed rank, whose exit reached the coordinator after its
  // peer's exit on the vanished peer) becomes the failure's cause: a generation's failure
  // is its earliest failed exit. Rank, worker and occurred_time follow; class and step stay.
  // False if the change could not be committed.
  bool ReattributeFailure(const std::string& job_id, int32_t rank, const std::string& worker_id,
                          const baton::v1::ProcessExit& exit, const std::string& what);
  // Records the first metric point of a restarted generation in its Failure record: `step`,
  // and `at` (the earliest point time of the batch; InfiniteFuture if none had one) as the
  // first-step time, clamped to [running_time, now].
  // False if the change could not be committed.
  bool NoteFirstStep(const std::string& job_id, int64_t step, absl::Time at);
  // StopAssignment of the job's generation to each of its workers, with `grace` (default:
  // options.stop_grace).
  void StopProcesses(const baton::v1::Job& job, const std::string& reason,
                     std::optional<absl::Duration> grace = std::nullopt);
  void SendStop(const std::string& worker_id, const std::string& job_id, int64_t generation,
                const std::string& reason, std::optional<absl::Duration> grace = std::nullopt);
  // WorkerRegistry::Send, unless halted (then false).
  bool Send(const std::string& worker_id, const baton::v1::CoordinatorMessage& msg);
  // A user failure recorded for the current generation of a RESTARTING job that the loss
  // of `worker_id` (a worker holding ranks of it, silent since `occurred`) preceded: the
  // survivors' exits were its consequence. The failure becomes the loss (class infra,
  // `reason`, `cause`), and the restart counts move from user to infra.
  // False if the change could not be committed.
  bool ReattributeToLoss(const std::string& job_id, const std::string& worker_id,
                         const std::string& reason, const std::string& cause,
                         absl::Time occurred);
  // The job if it exists and `generation` is its current one and it is active.
  const baton::v1::Job* ActiveJob(const std::string& job_id, int64_t generation) const;
  // A rank exited non-zero or was killed.
  static bool Failed(const baton::v1::ProcessExit& exit);
  // "exited with code 3" / "was killed by signal 9".
  static std::string DescribeExit(const baton::v1::ProcessExit& exit);
  // Distinct workers holding ranks of the job, in rank order. O(ranks).
  static std::vector<std::string> WorkersOf(const baton::v1::Job& job);
  // True if a rank of the job on that worker has not exited (as far as we know).
  static bool HasLiveRanksOn(const baton::v1::Job& job, const std::string& worker_id);
  // True if a rank of the job's current generation was assigned to that worker.
  static bool HasRanksOn(const baton::v1::Job& job, const std::string& worker_id);
  // A worker's report of `kind` (see refused_reports) about an assignment not its own:
  // counted, and logged with `why` the first time per worker and kind (at most
  // kMaxRefusalLogKeys pairs are remembered; past that, refusals are only counted).
  void RefuseReport(const std::string& worker_id, const std::string& kind,
                    const std::string& why);
  static constexpr size_t kMaxRefusalLogKeys = 4096;
  // Slots in use per worker by RENDEZVOUS/RUNNING/RESTARTING jobs, except `except_job`'s.
  std::map<std::string, int> UsedSlots(const std::string& except_job = "") const;
  // READY workers with their free slots (UsedSlots(except_job) subtracted).
  std::vector<WorkerCapacity> FreeCapacity(const std::string& except_job = "") const;
  // True if a JobManager write succeeded. Otherwise halts if the store failed, else logs
  // the refused change (`what`); the caller then abandons the change and its side effects.
  bool Ok(const absl::Status& status, const char* what);
  void Halt(const absl::Status& cause);

  JobManager* const jobs_;
  WorkerRegistry* const workers_;
  const Clock* const clock_;
  const CoordinatorOptions options_;
  std::map<std::string, Runtime> runtime_;  // by job id
  ProfileTable profiles_;
  absl::Status halted_;
  std::map<std::string, int64_t> refused_reports_;                 // by kind
  std::set<std::pair<std::string, std::string>> refusals_logged_;  // (worker, kind)
  absl::Time last_flush_ = absl::InfinitePast();  // the last FlushStaged
  std::function<void(const absl::Status&)> on_halt_;
};

}  // namespace baton::coordinator
