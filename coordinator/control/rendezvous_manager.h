#pragma once

// Gang scheduling and the rendezvous of each generation, up to its end: picks workers for
// queued jobs (policy/scheduler.h) and ranks (policy/rank_assignment.h), and runs a
// generation g through RENDEZVOUS: a pre-flight check of its hosts when the job has not
// checked one of them yet (RunPreflight to each, policy/preflight.h: hosts found slow or
// failing are marked unhealthy and, as many as workers.min allows, left out: the job is
// requeued, or, when it must keep some bad hosts, restarted at once on the rest of its
// gang), then ask rank 0's worker for a free port (ReservePort), then
// send every worker its StartAssignment with MASTER_ADDR/PORT; RUNNING once every worker
// reported AssignmentStarted; SUCCEEDED when every rank exited 0. A rank's failure, a
// worker that cannot start its ranks, or one that comes back without them go to the
// RecoveryManager. After a coordinator restart it re-attaches running generations to the
// workers that report them (Recover, Reattach).
//
// Fencing: worker messages about an older generation than the job's current one are
// rejected (CheckGeneration: logged; a stale AssignmentStarted also gets a StopAssignment
// for its generation). A worker's report about ranks it was not given is refused
// (ControlContext::RefuseReport).
//
// Threading: not thread-safe; the coordinator's event loop is its only caller.

#include <cstdint>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "coordinator/control/control_context.h"
#include "coordinator/control/recovery_manager.h"

namespace baton::coordinator {

class RendezvousManager {
 public:
  // Both must outlive this object.
  RendezvousManager(ControlContext* ctx, RecoveryManager* recovery);

  // Reconciles jobs recovered from the store: RENDEZVOUS ones go back to QUEUED, RUNNING
  // ones wait up to reattach_timeout for their workers to report back (Reattach).
  absl::Status Recover();
  // Starts the rendezvous of the queued jobs that fit the free capacity, then lets the
  // RecoveryManager grow running jobs with what the queue left (MaybeScaleUp); first come,
  // first served (policy/scheduler.h) unless a scheduler was set.
  void Schedule();
  // Replaces first come, first served: Schedule calls `scheduler` (a coordinator with
  // queues: SharingManager::Schedule).
  void SetScheduler(std::function<void()> scheduler) { scheduler_ = std::move(scheduler); }
  // Starts the next generation of `job` (its current record, possibly changed by the
  // caller; stored with the transition). `reason` is the event's reason ("Scheduled",
  // "Restarted").
  void StartRendezvous(baton::v1::Job job, const std::vector<std::string>& worker_ids,
                       const std::string& reason);
  // A (re)connected worker's Register: its listed assignments are matched to the jobs'
  // current generations (pids, exits; superseded ones are stopped); active jobs that count
  // on it and that it did not list fail their generation; restarting jobs' ranks it no
  // longer runs count as ended.
  void Reattach(const std::string& worker_id, const baton::v1::Register& reg);
  void OnPortReserved(const std::string& worker_id, const baton::v1::PortReserved& msg);
  // A worker's answer to RunPreflight: recorded; the last awaited one ends the check.
  void OnPreflightResult(const std::string& worker_id, const baton::v1::PreflightResult& msg);
  void OnAssignmentStarted(const std::string& worker_id, const baton::v1::AssignmentStarted& msg);
  // A worker could not carry out a ReservePort or a StartAssignment, or it stopped one
  // before its processes started: an active generation fails (class infra); a restarting
  // one counts the ranks that never started as stopped. A refusal of the spec's paths or
  // data (ASSIGNMENT_FAILURE_PATH_NOT_ALLOWED, _DATA_NOT_FOUND) is a user error: the job
  // fails, with the worker's message as its cause.
  void OnAssignmentFailed(const std::string& worker_id, const baton::v1::AssignmentFailed& msg);
  void OnProcessExited(const std::string& worker_id, const std::string& job_id, int64_t generation,
                       int32_t rank, const baton::v1::ProcessExit& exit);
  // Each reconcile, for an active job: a pre-flight past its answers' deadline ends
  // without the missing answers (those hosts failed); a RENDEZVOUS past its deadline fails
  // the job ("RendezvousTimeout"); a RUNNING one whose workers did not report back within
  // reattach_timeout of a coordinator restart fails its generation ("ReattachTimeout").
  // True if it acted.
  bool CheckTimeouts(const std::string& job_id, JobState state, absl::Time now);

 private:
  // Records an exit (code -1, now) for every rank of the generation `msg` names that never
  // started: those of `worker_id`, or every rank if no StartAssignment was sent yet (a
  // ReservePort failed). Returns false if the store failed.
  bool RecordRanksNotStarted(const std::string& worker_id, const baton::v1::AssignmentFailed& msg);
  // Active jobs that count on a reconnected worker that did not report them (it restarted
  // and their processes are gone) fail their generation.
  void FailJobsWithoutProcesses(const std::string& worker_id,
                                const std::set<std::string>& reported);
  // Ranks of restarting jobs on a reconnected worker that did not list them ended.
  void ForgetStoppedRanks(const std::string& worker_id, const std::set<std::string>& listed);
  // Sends every worker of the job (port reserved) its StartAssignment.
  void SendStartAssignments(const baton::v1::Job& job);
  // Asks rank 0's worker of the RENDEZVOUS generation for MASTER_PORT.
  void SendReservePort(const baton::v1::Job& job);
  // Starts the generation's pre-flight when the job has not checked one of its workers
  // that can take part (protocol >= 6, a probe port) and does not skip it; false if none
  // is needed.
  bool StartPreflight(const baton::v1::Job& job);
  // Sends this round's RunPreflight to every participant and sets its deadline.
  void SendPreflightRound(const baton::v1::Job& job, PendingPreflight& p);
  // Judges the answers (the missing ones failed). A host found slow in the first round is
  // only slow if a second round (at once, every link again) confirms it: each link counts
  // by the better of its two measurements, so a moment of contention does not mark a
  // host. Then marks bad hosts unhealthy. None to
  // leave out: ReservePort. Else the job goes back to QUEUED without them (Schedule places
  // it on healthy workers, spares included); if it must keep some bad hosts (workers.min),
  // which Schedule would not give back since they are marked, its next generation starts
  // at once on the rest of its gang (the kept hosts accepted for it, not checked again).
  void FinishPreflight(const std::string& job_id);

  ControlContext* const ctx_;
  RecoveryManager* const recovery_;
  JobManager* const jobs_;
  WorkerRegistry* const workers_;
  const Clock* const clock_;
  const CoordinatorOptions& options_;
  std::function<void()> scheduler_;
};

}  // namespace baton::coordinator
