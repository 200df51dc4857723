#include "common/assignment_failure.h"

namespace baton {
namespace {

struct Entry {
  baton::v1::AssignmentFailureCode code;
  absl::string_view reason;
};

constexpr Entry kTable[] = {
    {baton::v1::ASSIGNMENT_FAILURE_PORT_UNAVAILABLE, "PortUnavailable"},
    {baton::v1::ASSIGNMENT_FAILURE_PEER_UNREACHABLE, "PeerUnreachable"},
    {baton::v1::ASSIGNMENT_FAILURE_LEASE_EXPIRED, "LeaseExpired"},
    {baton::v1::ASSIGNMENT_FAILURE_LAUNCH_FAILED, "LaunchFailed"},
    {baton::v1::ASSIGNMENT_FAILURE_INVALID_ASSIGNMENT, "InvalidAssignment"},
    {baton::v1::ASSIGNMENT_FAILURE_PATH_NOT_ALLOWED, "PathNotAllowed"},
    {baton::v1::ASSIGNMENT_FAILURE_DATA_NOT_FOUND, "DataNotFound"},
    {baton::v1::ASSIGNMENT_FAILURE_WORKER_SHUTDOWN, "WorkerShutdown"},
    {baton::v1::ASSIGNMENT_FAILURE_STOP_REQUESTED, "StopRequested"},
    {baton::v1::ASSIGNMENT_FAILURE_DEVICES_BUSY, "DevicesBusy"},
};

}  // namespace

absl::string_view AssignmentFailureReason(baton::v1::AssignmentFailureCode code) {
  for (const Entry& e : kTable) {
    if (e.code == code) return e.reason;
  }
  return "";
}

baton::v1::AssignmentFailureCode AssignmentFailureFromReason(absl::string_view reason) {
  for (const Entry& e : kTable) {
    if (e.reason == reason) return e.code;
  }
  return baton::v1::ASSIGNMENT_FAILURE_UNSPECIFIED;
}

baton::v1::AssignmentFailureCode CodeOf(const baton::v1::AssignmentFailed& msg) {
  return msg.code() != baton::v1::ASSIGNMENT_FAILURE_UNSPECIFIED
             ? msg.code()
             : AssignmentFailureFromReason(msg.reason());
}

}  // namespace baton
