#pragma once

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace baton::worker {

// Lifecycle of one training process (one rank of an assignment) on this worker.
//
// Legal transitions:
//   STARTING -> RUNNING   the process was spawned (its pid is known)
//   STARTING -> EXITED    it could not be spawned (reported as exit code 127)
//   RUNNING  -> STOPPING  SIGTERM sent to its process group; SIGKILL follows after the grace
//   RUNNING  -> KILLING   SIGKILL sent right away (zero grace)
//   RUNNING  -> EXITED    it exited on its own
//   STOPPING -> KILLING   the grace expired; SIGKILL sent to its process group
//   STOPPING -> EXITED
//   KILLING  -> EXITED
// EXITED is terminal: the exit status is known and every process of the group is gone.
enum class RankState { kStarting, kRunning, kStopping, kKilling, kExited };

absl::string_view RankStateName(RankState state);
bool IsLegalTransition(RankState from, RankState to);

// The state of one rank plus the record of its transitions. Not thread-safe: guarded by the
// owner's lock.
class RankLifecycle {
 public:
  struct Transition {
    RankState from;
    RankState to;
    absl::Time time;
    std::string reason;
  };

  RankState state() const { return state_; }
  bool exited() const { return state_ == RankState::kExited; }
  const std::vector<Transition>& history() const { return history_; }

  // Moves to `to`, recording `reason` (e.g. "Spawned", "StopRequested", "GraceExpired",
  // "Exited"). Errors: FAILED_PRECONDITION naming both states if the transition is illegal;
  // the state is then unchanged.
  absl::Status TransitionTo(RankState to, absl::Time now, absl::string_view reason);

 private:
  RankState state_ = RankState::kStarting;
  std::vector<Transition> history_;
};

}  // namespace baton::worker
