#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "coordinator/job_manager.h"
#include "coordinator/worker_registry.h"
#include "proto/baton/v1/job.pb.h"
#include "proto/baton/v1/worker_service.pb.h"

namespace baton::coordinator {

struct CoordinatorOptions {
  // Interval workers are told to heartbeat at.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // A READY worker with no heartbeat for this long is LOST.
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // A job stuck in RENDEZVOUS (port reservation or process start) this long fails.
  absl::Duration rendezvous_timeout = absl::Seconds(60);
  // After a coordinator restart, how long RUNNING jobs wait for their workers to
  // reconnect and report their processes before they fail.
  absl::Duration reattach_timeout = absl::Seconds(30);
  // Grace between SIGTERM and SIGKILL when stopping a job's processes.
  absl::Duration stop_grace = absl::Seconds(10);
};

// The coordinator's brain: gang scheduling, rendezvous, supervision of running jobs,
// cancellation and reconciliation after its own restart. Drives JobManager (job
// records) and WorkerRegistry (worker sessions); talks to workers only through
// WorkerRegistry::Send.
//
// Rendezvous of a job (generation g): pick workers (Schedule) and ranks (AssignRanks),
// go RENDEZVOUS, ask rank 0's worker for a free port (ReservePort), then send every
// worker its StartAssignment with MASTER_ADDR/PORT; RUNNING once every worker reported
// AssignmentStarted. SUCCEEDED when every rank exited 0; FAILED at the first rank that
// failed or when a worker of the job is lost (the others are stopped).
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

  // --- JobService ---
  absl::StatusOr<baton::v1::Job> SubmitJob(baton::v1::JobSpec spec);
  // FAILED_PRECONDITION if the job is already terminal; NOT_FOUND if unknown.
  absl::StatusOr<baton::v1::Job> CancelJob(const std::string& job_id,
                                           const std::string& reason);
  // Workers with used_slots and job_ids filled in.
  std::vector<baton::v1::Worker> ListWorkers() const;

  // --- WorkerService stream ---
  // A worker's first message. FAILED_PRECONDITION for an unsupported protocol version,
  // INVALID_ARGUMENT for an empty worker id. Returns the session id for later calls.
  absl::StatusOr<uint64_t> OnWorkerConnected(const baton::v1::Register& reg,
                                             const std::string& peer_host,
                                             std::shared_ptr<WorkerChannel> channel);
  // Any later message of that session (ignored if the session was superseded).
  void OnWorkerMessage(const std::string& worker_id, uint64_t session,
                       const baton::v1::WorkerMessage& msg);
  // The session's stream ended.
  void OnWorkerDisconnected(const std::string& worker_id, uint64_t session);

  // One pass of the control loop: expire heartbeats, time out rendezvous and
  // re-attachment, schedule queued jobs. Idempotent; the daemon calls it on a timer and
  // after every event that may unblock work; tests call it directly.
  void ReconcileOnce();

 private:
  // Per-job state that lives only while the coordinator runs.
  struct Runtime {
    absl::Time rendezvous_deadline = absl::InfiniteFuture();
    std::set<std::string> started_workers;  // sent AssignmentStarted this generation
    // After a restart: workers that have yet to report this job's processes.
    std::set<std::string> awaiting_workers;
    absl::Time reattach_deadline = absl::InfiniteFuture();
  };

  void HandleWorkerLost(const std::string& worker_id, const std::string& why);
  void ReattachAssignments(const std::string& worker_id, const baton::v1::Register& reg);
  void Schedule();
  void StartRendezvous(const std::string& job_id, const std::vector<std::string>& worker_ids);
  void OnPortReserved(const std::string& worker_id, const baton::v1::PortReserved& msg);
  void OnAssignmentStarted(const std::string& worker_id,
                           const baton::v1::AssignmentStarted& msg);
  void OnProcessExited(const std::string& worker_id, const std::string& job_id,
                       int64_t generation, int32_t rank, const baton::v1::ProcessExit& exit);
  // Fails the job and stops its processes everywhere.
  void Fail(const std::string& job_id, const std::string& reason, const std::string& message);
  void StopProcesses(const baton::v1::Job& job, const std::string& reason);
  // The job if it exists and `generation` is its current one and it is active.
  baton::v1::Job* ActiveJob(const std::string& job_id, int64_t generation);
  // Distinct workers holding ranks of the job, in rank order.
  static std::vector<std::string> WorkersOf(const baton::v1::Job& job);
  // True if a rank of the job on that worker has not exited (as far as we know).
  static bool HasLiveRanksOn(const baton::v1::Job& job, const std::string& worker_id);
  // Slots in use per worker by RENDEZVOUS/RUNNING jobs.
  std::map<std::string, int> UsedSlots() const;
  // Logs (never fails the caller) a store error from a JobManager call.
  void Check(const absl::Status& status, const char* what);

  JobManager* const jobs_;
  WorkerRegistry* const workers_;
  const Clock* const clock_;
  const CoordinatorOptions options_;
  std::map<std::string, Runtime> runtime_;  // by job id
};

}  // namespace baton::coordinator
