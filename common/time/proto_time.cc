#include "common/time/proto_time.h"

namespace baton {

google::protobuf::Timestamp ToProto(absl::Time t) {
  google::protobuf::Timestamp out;
  const timespec ts = absl::ToTimespec(t);
  out.set_seconds(ts.tv_sec);
  out.set_nanos(static_cast<int32_t>(ts.tv_nsec));
  return out;
}

absl::Time FromProto(const google::protobuf::Timestamp& t) {
  return absl::FromUnixSeconds(t.seconds()) + absl::Nanoseconds(t.nanos());
}

google::protobuf::Duration ToProto(absl::Duration d) {
  google::protobuf::Duration out;
  const int64_t nanos = absl::ToInt64Nanoseconds(d);
  out.set_seconds(nanos / 1000000000);
  out.set_nanos(static_cast<int32_t>(nanos % 1000000000));
  return out;
}

absl::Duration FromProto(const google::protobuf::Duration& d) {
  return absl::Seconds(d.seconds()) + absl::Nanoseconds(d.nanos());
}

}  // namespace baton
