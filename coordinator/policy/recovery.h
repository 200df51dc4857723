#pragma once

// The decisions of a job's recovery after its generation failed (pure; the Coordinator
// gathers the facts and acts): first stopping the old generation, where a new one never
// starts beside a live one, then starting the next one or failing the job.
//
//   DecideStop:      wait | revoke the leases of workers whose ranks ignore the stop |
//                    the generation is stopped (every process exited or its worker's lease
//                    ran out; or, past the wait, only workers without leases remain)
//   DecideRestart... is restart_policy.h (budgets, crash loops, backoff)
//   DecideNextGeneration: wait for the backoff or for workers | rendezvous | fail

#include <string>
#include <vector>

#include "absl/time/time.h"

namespace baton::coordinator {

// One rank of the stopping generation, as its worker stands.
struct StoppingRank {
  int rank = 0;
  std::string worker;
  bool exited = false;             // its exit was reported
  bool processes_stopped = false;  // its worker's lease ran out (WorkerRegistry)
  bool connected = false;          // its worker has a live session
  bool leased = false;             // its worker holds a lease (protocol >= 3)
  absl::Time connected_since;      // when that session began
};

struct StopFacts {
  absl::Time now;
  absl::Time failed_at;    // the failure's time
  absl::Duration stop_wait;  // how long processes get to exit before leases are revoked
  std::vector<StoppingRank> ranks;
};

struct StopDecision {
  // The generation counts as stopped now (record it, then go on to the next generation).
  bool stopped = false;
  // Every process exited or was killed by its lease (else: given up on workers without a
  // lease, past the wait).
  bool all_stopped = false;
  // Revoke these workers' leases now (one entry per worker: the first rank that holds
  // the stop up there); then wait.
  std::vector<StoppingRank> revoke;
};

// Every rank exited or its worker's processes stopped: stopped. Before failed_at +
// stop_wait: wait. After: ranks on lost workers and on leased workers keep the wait (a
// lost worker's lease is running out; a leased connected worker's lease is revoked, unless
// it (re)connected less than stop_wait ago, when it was asked to stop then); ranks on
// connected workers without a lease are given up on; with nothing left to wait for:
// stopped.
StopDecision DecideStop(const StopFacts& facts);

struct NextGenerationFacts {
  absl::Time now;
  absl::Time restart_at;                // failure + backoff, and not before the stop
  absl::Duration rendezvous_timeout;    // how long to wait for enough workers after that
  bool gang_found = false;              // PlaceRestart found workers for the next generation
};

enum class NextGeneration { kWait, kRendezvous, kFail };

// Before restart_at: wait. Then a gang: rendezvous; none: wait until restart_at +
// rendezvous_timeout, then fail (not enough workers).
NextGeneration DecideNextGeneration(const NextGenerationFacts& facts);

}  // namespace baton::coordinator
