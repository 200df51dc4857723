#pragma once

// Sharing a cluster (pure): which queued jobs start, which running jobs shrink or are
// preempted to make room, and why each job still waits. One pass over a snapshot of the
// queues, jobs and workers; the coordinator carries the decisions out (docs/
// ARCHITECTURE.md, "Sharing a cluster").
//
// The model.
//  - Resources are slots and GPUs (a GPU job's slots are GPUs, on workers that have them).
//  - A queue (one per team) has a nominal quota. Queues in a cohort lend each other what
//    they do not use: a queue may go beyond its nominal quota while the cohort as a whole
//    stays within the sum of its queues' quotas (borrowing); the cohort's total is never
//    exceeded, so a queue whose own quota is lent out gets it back by reclaiming
//    (preemption, below), and while one of its jobs waits for room within its own quota
//    nobody in the cohort borrows. A queue without a cohort never goes beyond its own.
//  - A job is admitted whole: its gang of at least workers.min workers, each with the
//    job's per-worker need free; it takes up to workers.max (within quota and capacity).
//    A job that is not preemptible never borrows: what it held beyond its queue's own
//    quota could never be reclaimed.
//  - Order (the same in every pass for the same snapshot): jobs room was made for
//    (`nominated`) first, then higher priority; among
//    equal priorities the job of the queue using the least of its quota (dominant share:
//    the larger of its slot and GPU fractions), then the job of the user with the least
//    recent usage in that queue (dominant-resource fairness over decayed usage:
//    DecayUsage), then the earlier submission.
//  - Backfill: the first job in that order that has quota but does not fit the free
//    workers holds a reservation: the workers.min workers closest to taking one of its
//    members (the most free slots) hold what a member needs of what is free there, so a
//    later (smaller) job starts only beside them, never on the room the gang waits for.
//    The held workers only gain free room as their jobs end (nothing new lands on what is
//    held), so the gang's start comes no later for the backfill. (Without run-time limits,
//    which Baton's jobs do not declare, a scheduler cannot know that a backfilled job
//    would end before the gang starts; keeping it off the gang's workers needs none.)
//  - Preemption, for the first job in order that has quota but no room, when it is
//    entitled to room: it reclaims its own queue's nominal quota (others borrow it), or it
//    outranks lower-priority jobs of its own queue. First elastic jobs running above
//    their workers.min shrink toward it (a planned resize: checkpoint, continue smaller),
//    then whole jobs are preempted (checkpoint, stop, requeue, resume exactly): borrowers
//    before the job's own queue's lower priorities, lowest priority first, newest first.
//    Non-preemptible jobs are never chosen. Nothing is touched unless the plan frees
//    enough for the job to start, and nothing new is planned while an earlier release is
//    still under way (a job `releasing`).
//
// Complexity: O(J log J + W log W + J x S) for J jobs, W workers and S distinct
// per-worker needs (a count of workers per free-slot level answers "are there N workers
// with s free" in O(S)); placing a job touches only the workers it takes.

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "absl/time/time.h"

namespace baton::coordinator {

struct Quantity {
  int64_t slots = 0;
  int64_t gpus = 0;

  Quantity& operator+=(const Quantity& o) {
    slots += o.slots;
    gpus += o.gpus;
    return *this;
  }
  Quantity& operator-=(const Quantity& o) {
    slots -= o.slots;
    gpus -= o.gpus;
    return *this;
  }
  friend Quantity operator+(Quantity a, const Quantity& b) { return a += b; }
  friend Quantity operator-(Quantity a, const Quantity& b) { return a -= b; }
  friend Quantity operator*(Quantity a, int64_t k) { return {a.slots * k, a.gpus * k}; }
  // Every component <=.
  bool FitsIn(const Quantity& o) const { return slots <= o.slots && gpus <= o.gpus; }
  bool operator==(const Quantity& o) const { return slots == o.slots && gpus == o.gpus; }
};

struct QueueConfig {
  std::string name;
  std::string cohort;  // "": none
  Quantity nominal;
};

struct AdmissionJob {
  enum class Phase {
    kPending,    // queued
    kRunning,    // admitted: holds its workers
    kReleasing,  // shrinking or being preempted: still holds its workers
  };
  std::string id;
  std::string queue;
  std::string user;
  int priority = 0;
  int64_t seq = 0;  // submission order
  Phase phase = Phase::kPending;
  int slots_per_worker = 1;
  bool gpu = false;  // its slots are GPUs
  int min_workers = 1;
  int max_workers = 1;
  std::vector<std::string> workers;  // running, releasing: its gang
  bool preemptible = true;
  bool elastic = false;  // can shrink to min_workers by a planned resize
  // Pending: room was made for it (shrinks, preemptions) and it has not started yet. It
  // goes first, so what was freed for it is not taken by another job.
  bool nominated = false;
  Quantity PerWorker() const { return {slots_per_worker, gpu ? slots_per_worker : 0}; }
};

struct AdmissionWorker {
  std::string id;
  int free_slots = 0;
  int total_slots = 0;
  bool gpus = false;  // its slots are GPUs
};

struct AdmissionSnapshot {
  std::vector<QueueConfig> queues;
  std::vector<AdmissionJob> jobs;
  std::vector<AdmissionWorker> workers;
  // Decayed usage per queue and user (DecayUsage): the fair-share order inside a queue.
  std::map<std::string, std::map<std::string, Quantity>> user_usage;
};

// Why a job waits (the first obstacle the pass met), with the numbers to say it.
struct PendingReason {
  enum class Kind {
    kUnknownQueue,  // its queue is not (or no longer) configured
    kQuota,         // its queue's quota (and the cohort's spare) cannot take it
    kCapacity,      // quota allows, too few workers have room
    kReserved,      // room exists but is held for an earlier gang (backfill)
    kPreempting,    // room is being made for it (shrinks/preemptions under way)
  };
  Kind kind = Kind::kCapacity;
  Quantity need;        // what its workers.min needs
  Quantity queue_used;  // its queue's usage
  Quantity queue_nominal;
  std::string cohort;          // "" if none
  Quantity cohort_spare;       // what the cohort's other queues leave unused
  int fitting_workers = 0;     // workers that have room for one of its members now
  std::string lender_waiting;  // kQuota: a queue of the cohort waits for its own quota
  std::string reserved_for;    // kReserved: the job holding the reservation
  bool cannot_borrow = false;  // it is not preemptible, so it stays within its own quota
};

// "needs 4 slots; queue team-a at 8/8 slots of its quota; borrowing unavailable in cohort
// research (0 slots spare)" and the like.
std::string DescribePending(const AdmissionJob& job, const PendingReason& why);

struct Admission {
  std::string job_id;
  std::vector<std::string> worker_ids;  // sorted
  bool borrowing = false;               // its queue goes beyond its nominal quota with it
};

struct Shrink {
  std::string job_id;
  int to_workers = 0;                // >= its min_workers
  std::vector<std::string> leaving;  // the workers it gives up
  std::string for_job;
};

struct Preemption {
  std::string job_id;
  std::string for_job;
  std::string why;  // "reclaim" (its queue borrowed the quota) or "priority"
};

struct Waiting {
  std::string job_id;
  PendingReason why;
  int position = 0;  // in its queue, 1 = next
};

struct AdmissionPlan {
  std::vector<Admission> admit;
  std::vector<Shrink> shrink;
  std::vector<Preemption> preempt;
  // Every job still pending, in the pass's order.
  std::vector<Waiting> pending;
};

// The entry of `job_id` in plan.pending; nullptr if it is not pending. O(pending).
const Waiting* FindWaiting(const AdmissionPlan& plan, const std::string& job_id);

// One scheduling pass. Jobs of unknown queues wait (kUnknownQueue). Deterministic: the
// same snapshot gives the same plan. Thread-compatible, no I/O.
AdmissionPlan PlanAdmission(const AdmissionSnapshot& snapshot);

// Decayed usage: `previous` halved every `half_life`, plus `running` held for `elapsed`
// (slot-seconds and GPU-seconds, as integers).
Quantity DecayUsage(const Quantity& previous, const Quantity& running, absl::Duration elapsed,
                    absl::Duration half_life);

}  // namespace baton::coordinator
