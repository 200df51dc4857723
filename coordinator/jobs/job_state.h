#pragma once

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "baton/v1/job.pb.h"

namespace baton::coordinator {

// A job's lifecycle. The legal transitions are exactly:
//
//   kQueued     -> kRendezvous | kCancelled
//   kRendezvous -> kRunning | kQueued (a chosen worker vanished) | kFailed | kCancelled |
//                  kRestarting (a process or worker of the new generation failed)
//   kRunning    -> kSucceeded | kFailed | kCancelled | kRestarting
//   kRestarting -> kRendezvous | kQueued (preempted: back in its queue once it stopped) |
//                  kFailed | kCancelled
//
// kSucceeded, kFailed and kCancelled are terminal. Kept separate from the proto enum so
// the wire format can evolve independently; convert with JobStateToProto/JobStateFromProto.
enum class JobState {
  kQueued,
  kRendezvous,
  kRunning,
  kSucceeded,
  kFailed,
  kCancelled,
  kRestarting,
};

bool IsTerminal(JobState state);
// RENDEZVOUS or RUNNING: the job's current generation has processes (being) started.
bool IsActive(JobState state);

// OK if `from -> to` is legal, else FAILED_PRECONDITION naming both states.
absl::Status CheckTransition(JobState from, JobState to);

// "QUEUED", "RUNNING", ... (the names users see).
absl::string_view JobStateName(JobState state);

baton::v1::JobState JobStateToProto(JobState state);
// INVALID_ARGUMENT for JOB_STATE_UNSPECIFIED and unknown values.
absl::Status JobStateFromProto(baton::v1::JobState proto, JobState* state);

}  // namespace baton::coordinator
