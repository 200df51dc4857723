#pragma once

// AssignmentFailed's reasons (proto/baton/v1/worker_service.proto): the one table between
// the enum the coordinator decides on and the names logs, events and older peers use.

#include "absl/strings/string_view.h"
#include "baton/v1/worker_service.pb.h"

namespace baton {

// "PathNotAllowed", "DataNotFound", ...; "" for UNSPECIFIED.
absl::string_view AssignmentFailureReason(baton::v1::AssignmentFailureCode code);

// The code of a reason name; UNSPECIFIED for names the table does not hold.
baton::v1::AssignmentFailureCode AssignmentFailureFromReason(absl::string_view reason);

// `msg.code()`, or, from a worker that left it unset, the code of `msg.reason()`.
baton::v1::AssignmentFailureCode CodeOf(const baton::v1::AssignmentFailed& msg);

}  // namespace baton
