#pragma once

// Sharing a cluster (docs/ARCHITECTURE.md, "Sharing a cluster"): on a coordinator started
// with a queue file (coordinator/queues/queue_file.h), every scheduling pass goes through
// PlanAdmission (policy/admission.h) over a snapshot of the queues, the jobs (queued,
// admitted, releasing) and the schedulable workers, and this class carries the plan out:
//   - admissions start the job's rendezvous on the planned workers;
//   - shrinks are planned resizes (RecoveryManager::Resize, FAILURE_REASON_SHRINKING):
//     rank 0 checkpoints at a step boundary, the next generation runs on the workers kept
//     (Failure.released_workers, max_next_workers);
//   - preemptions are planned resizes too (FAILURE_REASON_PREEMPTED): rank 0 checkpoints,
//     the processes stop, the job goes back to QUEUED ("Requeued") and, admitted again,
//     resumes from that checkpoint. Class planned: no restart budget, no backoff.
// The job room was made for is "nominated": it goes first in later passes until it starts,
// so what was freed for it is not taken by another job. Running jobs grow (scale-up) only
// when nothing waits, and only within their queue's quota (or the cohort's spare); a
// restart never takes more workers than its failed generation had.
//
// Durable: a job's queue and priority (Job.queueing, resolved at submit) and its
// preemptions; a preemption or shrink is a Failure record committed before it acts. Coordinator
// memory (rebuilt by the next passes after a restart): the latest plan (positions and
// reasons), the nominations, the users' decayed usage (fair share starts even) and the
// per-queue preemption counters.
//
// Threading: not thread-safe; the coordinator's event loop is its only caller.

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"
#include "coordinator/control/control_context.h"
#include "coordinator/control/recovery_manager.h"
#include "coordinator/policy/admission.h"
#include "coordinator/queues/queue_file.h"

namespace baton::coordinator {

class SharingManager {
 public:
  // `ctx` and `recovery` must outlive this object.
  SharingManager(ControlContext* ctx, RecoveryManager* recovery,
                 RecoveryManager::StartRendezvousFn start_rendezvous);

  // Whether queues are configured (SetQueues was called): then Schedule replaces first
  // come, first served.
  bool enabled() const { return enabled_; }
  // Installs a queue file's set, at start and on each reload. Jobs keep the queue they were
  // submitted to: those of a queue the new set lacks wait (their reason says so) or, if
  // admitted, run on outside every quota.
  void SetQueues(QueueSet set);
  const QueueSet& queues() const { return set_; }

  // At submit: the queue (JobSpec.queue, or the default) and priority the job of `owner`
  // gets. QueueFor's and PriorityIn's errors (a priority above the queue's max_priority is
  // PERMISSION_DENIED), naming the field.
  absl::StatusOr<baton::v1::JobQueueing> Resolve(const baton::v1::JobSpec& spec,
                                                 const std::string& owner) const;

  // One pass: plans over a snapshot and carries the plan out (see the file comment).
  void Schedule();

  // Fills in `job`'s queueing view (position, why it waits, what makes room for it,
  // borrowing) from the latest pass. Nothing for a job without a queue.
  void Describe(baton::v1::Job* job) const;
  // ClusterService.ListQueues: every queue of the set with its usage now.
  baton::v1::ListQueuesResponse ListQueues() const;

 private:
  // FAILED_PRECONDITION, naming workers.min, when the job's gang needs more slots than its
  // queue can ever hold: its quota, or its cohort's total if it may borrow (preemptible).
  absl::Status CanEverStart(const baton::v1::JobSpec& spec, const std::string& queue) const;
  // The queue a job waits in: its recorded one, or the file's default for a job
  // submitted before the coordinator had queues.
  std::string QueueOf(const baton::v1::Job& job) const;
  AdmissionSnapshot Snapshot();
  // Advances every user's decayed usage to now by what its jobs held since the last pass.
  void DecayUsageTo(absl::Time now, const std::vector<AdmissionJob>& jobs);
  // Carries out one shrink / preemption / admission of `plan`.
  void CarryOut(const Shrink& s);
  void CarryOut(const Preemption& p);
  void CarryOut(const Admission& a);
  // How many of `joining` workers the running `job` may grow by (MaybeScaleUp): what its
  // queue's quota (or its cohort's) leaves, less what this pass already granted.
  int GrowthAllowed(const baton::v1::Job& job, int joining,
                    std::map<std::string, Quantity>& granted,
                    std::map<std::string, Quantity>& cohort_granted) const;
  // The queue of the set named `name`; nullptr if none.
  const QueueConfig* FindQueue(const std::string& name) const;
  // The sum of the nominal quotas of `cohort`'s queues.
  Quantity CohortNominal(const std::string& cohort) const;
  // What an admitted job holds: per worker x its workers.
  Quantity Held(const baton::v1::Job& job) const;
  bool IsGpuJob(const baton::v1::Job& job) const;
  // Whether every one of `workers` (at least one) has GPUs.
  bool AllHaveGpus(const std::vector<std::string>& workers) const;

  ControlContext* const ctx_;
  RecoveryManager* const recovery_;
  const RecoveryManager::StartRendezvousFn start_rendezvous_;
  bool enabled_ = false;
  QueueSet set_;
  // The latest pass's jobs and its waiting ones (with why), and, built by the first
  // Describe after it, where each waiting job is in them.
  std::vector<AdmissionJob> last_jobs_;
  std::vector<Waiting> last_waiting_;
  mutable std::unordered_map<std::string, std::pair<const Waiting*, const AdmissionJob*>>
      waiting_index_;
  std::set<std::string> nominated_;
  std::map<std::string, std::vector<std::string>> making_room_;   // by job id room is for
  std::map<std::string, std::map<std::string, Quantity>> usage_;  // queue -> user
  absl::Time usage_time_ = absl::InfinitePast();
  std::map<std::string, int64_t> preemptions_, shrinks_;  // by queue
  std::map<std::string, Quantity> queue_used_;  // what each queue held after the latest pass
};

}  // namespace baton::coordinator
