#pragma once

#include <string>

#include "absl/time/time.h"
#include "baton/v1/job.pb.h"

namespace baton::coordinator {

// What a failure of a job's current generation leads to (pure; see DecideRestart).
struct RestartDecision {
  enum class Kind {
    kRestart,          // next generation after `backoff`
    kCrashLoop,        // fail the job: the same user failure at the same step twice
    kBudgetExhausted,  // fail the job: the class's restart budget is spent
  };
  Kind kind = Kind::kRestart;
  // The job's new message (and the event's): why it restarts or fails.
  std::string message;
  // Before the next rendezvous (kRestart only).
  absl::Duration backoff = absl::ZeroDuration();
  // The failing transition's reason: "CrashLoop" / "RestartBudgetExhausted", or
  // `failure.reason()` for a restart.
  std::string reason;
};

// Whether the failed generation (`failure`'s, the job's current one) made healthy progress
// before it failed: it reported a step at least policy.healthy_steps past the step it
// resumed at (the previous failure's resumed_step; 0 for the first generation), or it
// ran for policy.healthy_time (from the previous failure's running_time, or the job's
// start for the first generation, to the failure's occurred_time, else fail_time).
bool MadeHealthyProgress(const baton::v1::Job& job, const baton::v1::Failure& failure,
                         const baton::v1::RestartPolicy& policy);

// Records `failure` (of `job`'s current generation, class infra/user/stall) in
// job->restarts() and decides, from the spec's RestartPolicy (defaults applied):
//   - crash loop: a user failure at the same step (or both with none) as a user failure of
//     the previous generation: fail;
//   - healthy progress (MadeHealthyProgress): the recent counts start over
//     (failure.healthy_before);
//   - budget spent: the class used all its restarts since the last healthy progress: fail;
//   - otherwise: count the restart (in the life and recent counts), set failure.backoff (the
//     n-th recent restart waits min(backoff_initial x 2^(n-1), backoff_max), n counting
//     every class) and failure.next_generation, restart.
RestartDecision DecideRestart(baton::v1::Job* job, baton::v1::Failure failure);

// Records a planned resize (class planned: no budget, no backoff) of `job`'s current
// generation in job->restarts().
void RecordPlannedRestart(baton::v1::Job* job, baton::v1::Failure failure);

// Whether the stop after a failure of `reason` keeps the ranks that wait for the next
// generation (StopAssignment.keep_waiting_ranks): built-in trainer jobs that take in-memory
// snapshots (snapshot_every not -1; ZeRO-sharded too: its kept ranks restore the last
// periodic snapshot, the lost rank's shard being gone; not pipelined: those take none and
// restore from disk), after failures that leave the other ranks' processes unharmed: a
// rank's exit (RankFailed, OomKilled) or a lost worker (WorkerLost, LeaseExpired). Never
// for a stall (the ranks themselves may be hung) or anything else. And only when the next
// generation starts within kKeepWaitingMaxBackoff (`backoff`: the restart's): workers let
// a kept process go when no generation takes it within their --rejoin_timeout (10 s by
// default), so a longer wait (a crash loop's growing backoff) would keep them for nothing.
inline constexpr absl::Duration kKeepWaitingMaxBackoff = absl::Seconds(5);
bool KeepsWaitingRanks(const baton::v1::JobSpec& spec, baton::v1::FailureReason reason,
                       absl::Duration backoff);

// The job's newest Failure record; nullptr if none.
baton::v1::Failure* LastFailure(baton::v1::Job* job);

// "step 5" / "no step reported", for messages.
std::string StepText(const baton::v1::Failure& f);

}  // namespace baton::coordinator
