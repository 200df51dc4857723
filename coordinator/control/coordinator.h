#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"
#include "coordinator/control/control_context.h"
#include "coordinator/control/profile_manager.h"
#include "coordinator/control/profile_table.h"
#include "coordinator/control/recovery_manager.h"
#include "coordinator/control/rendezvous_manager.h"
#include "coordinator/control/sharing_manager.h"
#include "coordinator/control/worker_registry.h"
#include "coordinator/jobs/job_manager.h"

namespace baton::coordinator {

// The coordinator's control logic, behind the JobService and the WorkerService stream: it
// routes each call and worker message to the manager that owns its concept, runs the
// reconcile tick and halts. Managers (each its own file; their decisions are pure functions
// in coordinator/policy/):
//   - RendezvousManager (rendezvous_manager.h): gang scheduling, a generation's rendezvous,
//     process starts and exits, re-attachment after a coordinator restart;
//   - RecoveryManager (recovery_manager.h): failures, planned resizes (drain, scale-up),
//     stopping a generation, lease revocation, restarts;
//   - ProfileManager (profile_manager.h): `baton profile`;
//   - ControlContext (control_context.h): what they share (job records, worker sessions,
//     clock, per-job runtime state) and the effects (commit or halt, send, stop, fail).
// Jobs live in JobManager (coordinator/jobs), worker sessions and leases in WorkerRegistry.
//
// Durable, then act: every decision is committed through JobManager (one transaction per
// change) before the messages it causes are sent. If a commit fails because the store
// failed, the coordinator halts: it sends nothing more, every entry point answers
// UNAVAILABLE or does nothing, and the halt handler runs once (the daemon stops serving and
// exits; a restart recovers from disk). A change refused for another reason (a broken
// invariant, such as an illegal transition) is abandoned whole and logged.
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
  const absl::Status& halted() const { return ctx_.halted(); }
  // Before a shutdown: stops acting (ControlContext::Quiesce), so that the workers' streams
  // closing under it fail no generation.
  void Quiesce() { ctx_.Quiesce(); }

  // --- JobService ---
  // See JobManager::Submit (`request_id` makes it idempotent).
  absl::StatusOr<baton::v1::Job> SubmitJob(baton::v1::JobSpec spec,
                                           const std::string& request_id = "",
                                           const std::string& owner = "");
  // --- Sharing a cluster (SharingManager) ---
  // Installs the queue file's set (at start and on each reload): from then on jobs are
  // admitted through the queues (SubmitJob resolves their queue and priority; without a
  // set it refuses specs that name either).
  void SetQueues(QueueSet set);
  // ClusterService.ListQueues.
  baton::v1::ListQueuesResponse ListQueues() const { return sharing_.ListQueues(); }
  // Fills in Job.queueing's view (position, why it waits, ...) from the latest pass.
  void DescribeQueueing(baton::v1::Job* job) const { sharing_.Describe(job); }

  // FAILED_PRECONDITION if the job is already terminal; NOT_FOUND if unknown.
  absl::StatusOr<baton::v1::Job> CancelJob(const std::string& job_id, const std::string& reason);
  // Workers with used_slots and job_ids filled in.
  std::vector<baton::v1::Worker> ListWorkers() const;
  // ClusterService.CordonWorker/UncordonWorker (its contract): the set of cordons is
  // written to the store before it applies; the worker as ListWorkers shows it (a cordoned
  // worker not seen since this coordinator started: only its id and cordon).
  absl::StatusOr<baton::v1::Worker> CordonWorker(const std::string& worker_id,
                                                 const std::string& reason, const std::string& by);
  absl::StatusOr<baton::v1::Worker> UncordonWorker(const std::string& worker_id);
  // `baton profile` (JobService.ProfileJob): ProfileManager::ProfileJob's contract.
  absl::Status ProfileJob(const baton::v1::ProfileJobRequest& request, ProfileTable::Done done) {
    return profiles_.ProfileJob(request, std::move(done));
  }
  // Profiles in flight (for tests and metrics).
  size_t profiles_in_flight() const { return profiles_.in_flight(); }
  // Worker reports refused because they were about an assignment this coordinator did not
  // give that worker in the job's current generation (a worker speaks only for its own
  // ranks), by kind: "logs", "metrics", "assignment_started", "assignment_failed",
  // "process_exited", "port_reserved", "profile_trace". For metrics.
  const std::map<std::string, int64_t>& refused_reports() const { return ctx_.refused_reports(); }
  // Changes the coordinator abandoned because its own rules refused them (an illegal job
  // transition, a broken invariant: a bug, never a store failure), by change. For metrics.
  const std::map<std::string, int64_t>& refused_changes() const { return ctx_.refused_changes(); }
  // Worker lifecycle events refused (WorkerRegistry::refused_events). For metrics.
  const std::map<std::string, int64_t>& refused_worker_events() const {
    return workers_->refused_events();
  }

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
  // The worker is leaving (it sent Draining): it gets no new work, and the jobs with ranks
  // on it resize (RecoveryManager::MoveJobsOff).
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
  static absl::Status CheckGeneration(const baton::v1::Job& job, int64_t generation) {
    return coordinator::CheckGeneration(job, generation);
  }

 private:
  // Writes the whole set of cordons to the store (halting if the store failed).
  absl::Status SaveCordons(const std::map<std::string, baton::v1::WorkerCordon>& all);
  // The worker as ListWorkers shows it, or its id and cordon if it is not connected since
  // this coordinator started.
  baton::v1::Worker ShownWorker(const std::string& worker_id) const;
  void OnMetrics(const std::string& worker_id, const baton::v1::MetricsReport& m);
  // Adds the report's lines of the job's current generation whose rank runs on the worker;
  // others are refused (RefuseReport), older generations' dropped.
  void OnLogs(const std::string& worker_id, const baton::v1::LogsReport& l);

  ControlContext ctx_;
  RecoveryManager recovery_;
  RendezvousManager rendezvous_;
  ProfileManager profiles_;
  SharingManager sharing_;
  // Shorthands for ctx_'s.
  JobManager* const jobs_;
  WorkerRegistry* const workers_;
  const Clock* const clock_;
  absl::Time last_flush_ = absl::InfinitePast();  // the last FlushStaged
  std::function<void(const absl::Status&)> on_halt_;
};

}  // namespace baton::coordinator
