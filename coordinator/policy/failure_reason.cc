#include "coordinator/policy/failure_reason.h"

#include "common/assignment_failure.h"

namespace baton::coordinator {
namespace {

struct Entry {
  baton::v1::FailureReason reason;
  absl::string_view name;
};

constexpr Entry kReasons[] = {
    {baton::v1::FAILURE_REASON_RANK_FAILED, "RankFailed"},
    {baton::v1::FAILURE_REASON_WORKER_LOST, "WorkerLost"},
    {baton::v1::FAILURE_REASON_LEASE_EXPIRED, "LeaseExpired"},
    {baton::v1::FAILURE_REASON_WORKER_RESTARTED, "WorkerRestarted"},
    {baton::v1::FAILURE_REASON_STALLED, "Stalled"},
    {baton::v1::FAILURE_REASON_REATTACH_TIMEOUT, "ReattachTimeout"},
    {baton::v1::FAILURE_REASON_ASSIGNMENT_FAILED, "AssignmentFailed"},
    {baton::v1::FAILURE_REASON_DRAINING, "Draining"},
    {baton::v1::FAILURE_REASON_SCALING_UP, "ScalingUp"},
    {baton::v1::FAILURE_REASON_OOM_KILLED, "OomKilled"},
    {baton::v1::FAILURE_REASON_PREEMPTED, "Preempted"},
    {baton::v1::FAILURE_REASON_SHRINKING, "Shrinking"},
};

}  // namespace

absl::string_view FailureReasonName(baton::v1::FailureReason reason) {
  for (const Entry& e : kReasons) {
    if (e.reason == reason) return e.name;
  }
  return "Unspecified";
}

baton::v1::FailureReason FailureReasonOf(const baton::v1::Failure& failure) {
  if (failure.reason_code() != baton::v1::FAILURE_REASON_UNSPECIFIED) {
    return failure.reason_code();
  }
  for (const Entry& e : kReasons) {
    if (e.name == failure.reason()) return e.reason;
  }
  if (AssignmentFailureFromReason(failure.reason()) != baton::v1::ASSIGNMENT_FAILURE_UNSPECIFIED) {
    return baton::v1::FAILURE_REASON_ASSIGNMENT_FAILED;
  }
  return baton::v1::FAILURE_REASON_UNSPECIFIED;
}

bool IsWorkerLoss(baton::v1::FailureReason reason) {
  return reason == baton::v1::FAILURE_REASON_WORKER_LOST ||
         reason == baton::v1::FAILURE_REASON_LEASE_EXPIRED;
}

}  // namespace baton::coordinator
