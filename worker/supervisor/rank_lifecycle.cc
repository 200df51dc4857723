#include "worker/supervisor/rank_lifecycle.h"

#include "absl/strings/str_cat.h"

namespace baton::worker {

absl::string_view RankStateName(RankState state) {
  switch (state) {
    case RankState::kStarting:
      return "STARTING";
    case RankState::kRunning:
      return "RUNNING";
    case RankState::kStopping:
      return "STOPPING";
    case RankState::kKilling:
      return "KILLING";
    case RankState::kExited:
      return "EXITED";
  }
  return "UNKNOWN";
}

bool IsLegalTransition(RankState from, RankState to) {
  using S = RankState;
  switch (from) {
    case S::kStarting:
      return to == S::kRunning || to == S::kExited;
    case S::kRunning:
      return to == S::kStopping || to == S::kKilling || to == S::kExited;
    case S::kStopping:
      return to == S::kKilling || to == S::kExited;
    case S::kKilling:
      return to == S::kExited;
    case S::kExited:
      return false;
  }
  return false;
}

absl::Status RankLifecycle::TransitionTo(RankState to, absl::Time now, absl::string_view reason) {
  if (!IsLegalTransition(state_, to)) {
    return absl::FailedPreconditionError(
        absl::StrCat("illegal rank transition ", RankStateName(state_), " -> ", RankStateName(to)));
  }
  history_.push_back({state_, to, now, std::string(reason)});
  state_ = to;
  return absl::OkStatus();
}

}  // namespace baton::worker
