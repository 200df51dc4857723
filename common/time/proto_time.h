#pragma once

#include <google/protobuf/duration.pb.h>
#include <google/protobuf/timestamp.pb.h>

#include "absl/time/time.h"

namespace baton {

// Conversions between absl time types and the protobuf well-known types.
google::protobuf::Timestamp ToProto(absl::Time t);
absl::Time FromProto(const google::protobuf::Timestamp& t);
google::protobuf::Duration ToProto(absl::Duration d);
absl::Duration FromProto(const google::protobuf::Duration& d);

}  // namespace baton
