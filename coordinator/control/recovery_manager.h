#pragma once

// Recovery of a job whose generation failed or must resize: records the Failure, moves the
// job to RESTARTING, stops the generation's processes, waits until they certainly stopped
// (revoking the lease of a worker whose processes do not), then hands the next generation
// to the rendezvous. The decisions are pure functions in coordinator/policy/ (recovery.h:
// DecideStop, DecideNextGeneration; restart_policy.h: DecideRestart; scale_up.h;
// attribution.h); this class gathers their facts, commits what they decide and acts.
//
// Failures (the first of generation g moves a RENDEZVOUS/RUNNING job to RESTARTING): a
// rank exited non-zero or was killed (class user); a worker holding live ranks was lost,
// its lease expired, it came back without them, or it could not reach a peer (class
// infra); no rank made progress for the stall timeout (StallDetector, class stall). Two
// generations never run at the same time: g+1 starts only once every process of g
// reported its exit or its worker is lost and its lease has certainly expired
// (WorkerRegistry::ProcessesStopped); a connected worker whose processes do not stop
// within stop_grace + lease has its lease revoked. Once they all stopped and the backoff of
// the spec's RestartPolicy elapsed, g+1 re-rendezvouses on workers.min..max READY workers
// (PlaceRestart: survivors keep their ranks); if fewer than min are available for
// rendezvous_timeout the job FAILS. The job FAILS at once instead of restarting when the
// class's budget is spent ("RestartBudgetExhausted") or a user failure happens at the same
// step as the previous one ("CrashLoop"). Restart timing is derived from the stored Job, so
// it survives a coordinator restart.
//
// Planned resizes (class PLANNED: no budget, no backoff): a draining worker's jobs
// (MoveJobsOff) and RUNNING jobs that checkpoint on request below workers.max when free
// READY workers could join (MaybeScaleUp). A RUNNING job that can be asked resizes by
// asking rank 0 to checkpoint at its next step boundary (RequestCheckpoint) and stopping
// the other processes once any rank exited (or checkpoint_timeout passed); anything else is
// stopped at once.
//
// Threading: not thread-safe; the coordinator's event loop is its only caller.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "coordinator/control/control_context.h"
#include "coordinator/policy/recovery.h"

namespace baton::coordinator {

class RecoveryManager {
 public:
  // Starts the next generation of `job` (its record, changed by the caller; stored with
  // the transition) on `worker_ids`, with the transition's `reason`.
  using StartRendezvousFn = std::function<void(
      baton::v1::Job job, const std::vector<std::string>& worker_ids, const std::string& reason)>;

  // `ctx` must outlive this object.
  RecoveryManager(ControlContext* ctx, StartRendezvousFn start_rendezvous);

  // A failure of the current generation of a RENDEZVOUS/RUNNING job: records it and either
  // restarts (RESTARTING, processes stopped) or fails the job (budget spent, crash loop).
  // `rank` is the failed rank if known; `occurred` when it happened (InfinitePast: unknown).
  // The failure's reason name is FailureReasonName(reason), or `reason_name` if given (a
  // worker's assignment failure: the name of its AssignmentFailureCode).
  void FailGeneration(const std::string& job_id, baton::v1::FailureClass failure_class,
                      baton::v1::FailureReason reason, const std::string& cause,
                      std::optional<int32_t> rank, const std::string& worker_id,
                      absl::Time occurred = absl::InfinitePast(),
                      const std::string& reason_name = "");
  // A planned resize of an active job (class PLANNED): records it, goes RESTARTING and asks
  // rank 0 for a checkpoint or stops the processes. `reason`: FAILURE_REASON_DRAINING,
  // _SCALING_UP, _SHRINKING (the next generation leaves out `released`, and takes at most
  // `max_next_workers` workers when > 0) or _PREEMPTED (once the processes stopped the job
  // goes back to QUEUED: Requeue; Job.queueing.preemptions counts it).
  void Resize(const std::string& job_id, baton::v1::FailureReason reason, const std::string& cause,
              const std::string& worker_id, const std::vector<std::string>& released = {},
              int max_next_workers = 0);
  // Resizes the active jobs that have live ranks on a draining worker.
  void MoveJobsOff(const std::string& worker_id, const std::string& why);
  // How many of `joining` workers a RUNNING job may take (a coordinator with queues: what
  // its queue's quota allows, 0 while jobs wait).
  using ScaleUpAllowance = std::function<int(const baton::v1::Job& job, int joining)>;
  // Resizes RUNNING jobs that checkpoint on request (trainer, elastic command) below
  // workers.max that free READY workers could join (as many as `allowance` allows, when
  // given; the next generation is then capped at that size).
  void MaybeScaleUp(const ScaleUpAllowance& allowance = nullptr);
  // A coordinator with queues: a restart's next generation takes at most as many workers
  // as the failed one had (growing is admission's decision, through MaybeScaleUp).
  void HoldGangSizeOnRestart(bool hold) { hold_gang_size_ = hold; }
  // For a RESTARTING job: notes when its old processes stopped, and once they did and the
  // backoff elapsed, starts the next generation's rendezvous (or fails the job when too
  // few workers came within rendezvous_timeout). Nothing for a job in another state.
  void MaybeRestart(const std::string& job_id);
  // A worker was lost. `reason`: FAILURE_REASON_WORKER_LOST (stream closed) or
  // _LEASE_EXPIRED;
  // `occurred`: when the loss happened (last heartbeat, or now for a closed stream). Active
  // jobs with live ranks on it fail their generation; restarting ones may reattribute
  // their failure to the loss and restart.
  void HandleWorkerLost(const std::string& worker_id, baton::v1::FailureReason reason,
                        const std::string& why, absl::Time occurred);
  // A RUNNING job whose ranks made no progress for the stall timeout fails its generation
  // (class stall). Each reconcile.
  void CheckStall(const std::string& job_id, absl::Time now);
  // A failed exit of the failing generation that the workers' clocks place before the
  // recorded failure becomes the failure's cause (attribution.h). False if the change could
  // not be committed.
  bool ReattributeFailure(const std::string& job_id, int32_t rank, const std::string& worker_id,
                          const baton::v1::ProcessExit& exit, const std::string& what);
  // Records the first metric point of a restarted generation in its Failure record: `step`,
  // and `at` (the earliest point time of the batch; InfiniteFuture if none had one) as the
  // first-step time, clamped to [running_time, now]. False if the change could not be
  // committed.
  bool NoteFirstStep(const std::string& job_id, int64_t step, absl::Time at);

 private:
  // FailGeneration's decision and its effects for a failure already built (NewFailure).
  void FailWith(const std::string& job_id, baton::v1::Failure failure);
  // A Failure record of the job's current generation: class, reason (code, and name:
  // `reason_name` or FailureReasonName), cause, rank and worker as given, the generation's highest
  // reported step, fail_time now, occurred_time `occurred` (not after now; unset if InfinitePast).
  baton::v1::Failure NewFailure(const baton::v1::Job& job, const JobRuntime& rt,
                                baton::v1::FailureClass failure_class,
                                baton::v1::FailureReason reason, const std::string& reason_name,
                                const std::string& cause, std::optional<int32_t> rank,
                                const std::string& worker_id, absl::Time occurred) const;
  // True while the stopping generation's processes remain and the stop's wait has not run
  // out: checked on the stored record, before copying it (at N ranks a copy per exit would
  // make the stop O(N^2)).
  bool StillStopping(const std::string& job_id) const;
  // Once every process of the failed generation stopped (or DecideStop gives up on them),
  // records stopped_time (and lease_expired_time) in `f` with a GenerationStopped event;
  // revokes the leases DecideStop names meanwhile. False while they have not stopped or if
  // the store failed.
  bool NoteStopped(baton::v1::Job* job, baton::v1::Failure* f, absl::Time lease_expired);
  // A preempted job whose processes stopped goes back to QUEUED ("Requeued"); admission
  // starts it again, and its restart record carries on into that generation.
  void Requeue(const std::string& job_id);
  // Places the next generation (PlaceRestart) once `restart_at` passed: starts its
  // rendezvous, waits for workers, or fails the job (DecideNextGeneration).
  void PlaceNextGeneration(baton::v1::Job job, absl::Time restart_at);
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
  // The facts DecideStop decides on: each rank of `job`'s stopping generation and its worker.
  StopFacts StopFactsOf(const baton::v1::Job& job, absl::Time failed_at,
                        absl::Duration stop_wait) const;
  // Revokes the lease of `rank`'s worker (DecideStop said so), with an event naming the
  // rank; false if the event could not be stored (the coordinator halts).
  bool RevokeLease(const baton::v1::Job& job, const StoppingRank& rank, absl::Duration waited);
  // A user failure recorded for the current generation of a RESTARTING job that the loss of
  // `worker_id` (silent since `occurred`) preceded becomes the loss (class infra, `reason`,
  // `cause`; attribution.h). False if the change could not be committed.
  bool ReattributeToLoss(const std::string& job_id, const std::string& worker_id,
                         baton::v1::FailureReason reason, const std::string& cause,
                         absl::Time occurred);

  ControlContext* const ctx_;
  JobManager* const jobs_;
  WorkerRegistry* const workers_;
  const Clock* const clock_;
  const CoordinatorOptions& options_;
  const StartRendezvousFn start_rendezvous_;
  bool hold_gang_size_ = false;
};

}  // namespace baton::coordinator
