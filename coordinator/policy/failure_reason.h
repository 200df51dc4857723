#pragma once

// The one table of failure reasons: each FailureReason (proto/baton/v1/job.proto) and the
// name stored beside it in Failure.reason and used as the RESTARTING transition's reason.
// Code decides on the enum; the name is for people, events and older clients.

#include "absl/strings/string_view.h"
#include "baton/v1/job.pb.h"

namespace baton::coordinator {

// "RankFailed", "WorkerLost", ...; "AssignmentFailed" for FAILURE_REASON_ASSIGNMENT_FAILED
// (whose records name the worker's AssignmentFailureCode instead when it gave one);
// "Unspecified" for UNSPECIFIED or a value outside the enum.
absl::string_view FailureReasonName(baton::v1::FailureReason reason);

// The failure's reason_code; for a record written before the field existed, the code whose
// name its `reason` is, FAILURE_REASON_ASSIGNMENT_FAILED for a worker's assignment failure
// name ("PortUnavailable", ...), else UNSPECIFIED.
baton::v1::FailureReason FailureReasonOf(const baton::v1::Failure& failure);

// The loss of a worker (its stream closed or its lease expired): the generation's other
// ranks wait on it inside a collective, so there is nothing to wait for before stopping them.
bool IsWorkerLoss(baton::v1::FailureReason reason);

}  // namespace baton::coordinator
