#pragma once

// A worker's lifecycle as the coordinator sees it, driven by events. The legal ones are
// exactly:
//
//   kNew      --Connect-->  kReady      (never seen before; or kDraining if it registers
//                                        draining: kConnectDraining)
//   kReady    --Drain-->    kDraining   (it said it is draining)
//   kReady    --Lose-->     kLost       (its stream closed, its lease expired or was revoked)
//   kDraining --Lose-->     kLost
//   any state --Connect / ConnectDraining--> kReady / kDraining  (a registration always
//                                        replaces what was: a reconnect, a restarted daemon)
//
// kNew is where every worker starts and never returns to. Everything else (a Drain of a
// worker that is not READY, a Lose of one that is not connected) is refused: those are the
// races of a stream closing while a message about it is on its way, and the registry treats
// them as no-ops. Kept apart from the proto enum, as JobState is; convert with
// WorkerStateToProto.

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "baton/v1/job.pb.h"

namespace baton::coordinator {

enum class WorkerState { kNew, kReady, kDraining, kLost };

enum class WorkerEvent { kConnect, kConnectDraining, kDrain, kLose };

// The state after `event` in `from`; FAILED_PRECONDITION naming both when the lifecycle
// has no such transition. Pure.
absl::StatusOr<WorkerState> NextWorkerState(WorkerState from, WorkerEvent event);

// READY or DRAINING: the worker has a live session.
bool IsConnected(WorkerState state);

// "NEW", "READY", "DRAINING", "LOST"; "Connect", "ConnectDraining", "Drain", "Lose".
absl::string_view WorkerStateName(WorkerState state);
absl::string_view WorkerEventName(WorkerEvent event);

// kNew (not reported by ListWorkers) maps to WORKER_STATE_UNSPECIFIED.
baton::v1::WorkerState WorkerStateToProto(WorkerState state);

}  // namespace baton::coordinator
