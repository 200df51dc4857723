#pragma once

// What the Supervisor publishes about its assignments so that the agent can report them
// (worker/agent/report_ledger.h): facts as levels, a state read again and again, not events
// handed over once. Whether the coordinator was told is not a fact kept here.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "baton/v1/worker_service.pb.h"

namespace baton::worker {

// The facts of one assignment that has something to report: it was launched (every rank
// was spawned), or it failed and none of its processes runs any more. An assignment that
// waits for its launch, is being spawned, or failed with a process still running has none
// yet. Facts only grow until the assignment is forgotten: a launched one gains exits and
// start requests, a failed one never changes, and neither goes back to having none.
struct AssignmentFacts {
  std::string job_id;
  int64_t generation = 0;
  // Failed: why (job_id, generation, reason, code, message); `ranks` is then empty and
  // `start_requests` 0. A failed assignment never started and reports no exits.
  std::optional<baton::v1::AssignmentFailed> failure;
  // Launched: every rank in the request's order with its pid, and its exit (with a time)
  // once it exited.
  std::vector<baton::v1::RankInfo> ranks;
  // Launched: how often its start was asked for: 1 for the launch, plus 1 for each
  // StartAssignment of it received since. A new value means it should be reported as
  // started again.
  int64_t start_requests = 0;
};

// What a ReportLedger reads its facts from, and tells once they were all reported.
// Implemented by the Supervisor. Thread-safe; neither method calls back into the caller.
class AssignmentFactSource {
 public:
  virtual ~AssignmentFactSource() = default;

  // Every assignment that has facts, ordered by (job_id, generation).
  virtual std::vector<AssignmentFacts> ListFacts() const = 0;

  // The coordinator was told everything about the assignment, as of the facts that listed
  // `start_requests`: it is dropped (its devices are free again). Errors, after which the
  // assignment stays and its facts are to be read again: NOT_FOUND if it is unknown;
  // FAILED_PRECONDITION if it has no facts, a rank of it has not exited, or its start was
  // asked for again since (another `start_requests`).
  virtual absl::Status Forget(const std::string& job_id, int64_t generation,
                              int64_t start_requests) = 0;
};

}  // namespace baton::worker
