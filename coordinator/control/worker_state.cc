#include "coordinator/control/worker_state.h"

#include "absl/strings/str_cat.h"

namespace baton::coordinator {

absl::StatusOr<WorkerState> NextWorkerState(WorkerState from, WorkerEvent event) {
  switch (event) {
    case WorkerEvent::kConnect:
      return WorkerState::kReady;
    case WorkerEvent::kConnectDraining:
      return WorkerState::kDraining;
    case WorkerEvent::kDrain:
      if (from == WorkerState::kReady) return WorkerState::kDraining;
      break;
    case WorkerEvent::kLose:
      if (IsConnected(from)) return WorkerState::kLost;
      break;
  }
  return absl::FailedPreconditionError(absl::StrCat("a worker that is ", WorkerStateName(from),
                                                    " has no ", WorkerEventName(event)));
}

bool IsConnected(WorkerState state) {
  return state == WorkerState::kReady || state == WorkerState::kDraining;
}

absl::string_view WorkerStateName(WorkerState state) {
  switch (state) {
    case WorkerState::kNew:
      return "NEW";
    case WorkerState::kReady:
      return "READY";
    case WorkerState::kDraining:
      return "DRAINING";
    case WorkerState::kLost:
      return "LOST";
  }
  return "?";
}

absl::string_view WorkerEventName(WorkerEvent event) {
  switch (event) {
    case WorkerEvent::kConnect:
      return "Connect";
    case WorkerEvent::kConnectDraining:
      return "ConnectDraining";
    case WorkerEvent::kDrain:
      return "Drain";
    case WorkerEvent::kLose:
      return "Lose";
  }
  return "?";
}

baton::v1::WorkerState WorkerStateToProto(WorkerState state) {
  switch (state) {
    case WorkerState::kNew:
      return baton::v1::WORKER_STATE_UNSPECIFIED;
    case WorkerState::kReady:
      return baton::v1::WORKER_STATE_READY;
    case WorkerState::kDraining:
      return baton::v1::WORKER_STATE_DRAINING;
    case WorkerState::kLost:
      return baton::v1::WORKER_STATE_LOST;
  }
  return baton::v1::WORKER_STATE_UNSPECIFIED;
}

}  // namespace baton::coordinator
