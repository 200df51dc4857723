#include "coordinator/jobs/job_state.h"

#include "absl/strings/str_cat.h"

namespace baton::coordinator {

bool IsActive(JobState state) {
  return state == JobState::kRendezvous || state == JobState::kRunning;
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

absl::Status CheckTransition(JobState from, JobState to) {
  bool legal = false;
  switch (from) {
    case JobState::kQueued:
      legal = to == JobState::kRendezvous || to == JobState::kCancelled;
      break;
    case JobState::kRendezvous:
      legal = to == JobState::kRunning || to == JobState::kQueued || to == JobState::kFailed ||
              to == JobState::kCancelled || to == JobState::kRestarting;
      break;
    case JobState::kRunning:
      legal = to == JobState::kSucceeded || to == JobState::kFailed ||
              to == JobState::kCancelled || to == JobState::kRestarting;
      break;
    case JobState::kRestarting:
      legal = to == JobState::kRendezvous || to == JobState::kQueued || to == JobState::kFailed ||
              to == JobState::kCancelled;
      break;
    case JobState::kSucceeded:
    case JobState::kFailed:
    case JobState::kCancelled:
      legal = false;
      break;
  }
  if (legal) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat("illegal job state transition ",
                                                    JobStateName(from), " -> ",
                                                    JobStateName(to)));
}

absl::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "QUEUED";
    case JobState::kRendezvous:
      return "RENDEZVOUS";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kCancelled:
      return "CANCELLED";
    case JobState::kRestarting:
      return "RESTARTING";
  }
  return "UNKNOWN";
}

baton::v1::JobState JobStateToProto(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return baton::v1::JOB_STATE_QUEUED;
    case JobState::kRendezvous:
      return baton::v1::JOB_STATE_RENDEZVOUS;
    case JobState::kRunning:
      return baton::v1::JOB_STATE_RUNNING;
    case JobState::kSucceeded:
      return baton::v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed:
      return baton::v1::JOB_STATE_FAILED;
    case JobState::kCancelled:
      return baton::v1::JOB_STATE_CANCELLED;
    case JobState::kRestarting:
      return baton::v1::JOB_STATE_RESTARTING;
  }
  return baton::v1::JOB_STATE_UNSPECIFIED;
}

absl::Status JobStateFromProto(baton::v1::JobState proto, JobState* state) {
  switch (proto) {
    case baton::v1::JOB_STATE_QUEUED:
      *state = JobState::kQueued;
      return absl::OkStatus();
    case baton::v1::JOB_STATE_RENDEZVOUS:
      *state = JobState::kRendezvous;
      return absl::OkStatus();
    case baton::v1::JOB_STATE_RUNNING:
      *state = JobState::kRunning;
      return absl::OkStatus();
    case baton::v1::JOB_STATE_SUCCEEDED:
      *state = JobState::kSucceeded;
      return absl::OkStatus();
    case baton::v1::JOB_STATE_FAILED:
      *state = JobState::kFailed;
      return absl::OkStatus();
    case baton::v1::JOB_STATE_CANCELLED:
      *state = JobState::kCancelled;
      return absl::OkStatus();
    case baton::v1::JOB_STATE_RESTARTING:
      *state = JobState::kRestarting;
      return absl::OkStatus();
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown job state ", proto));
  }
}

}  // namespace baton::coordinator
