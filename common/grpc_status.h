#pragma once

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace baton {

// absl::Status <-> grpc::Status with the same code and message. The only place the two
// meet: handlers convert once, at the boundary.
grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace baton
