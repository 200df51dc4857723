#include "common/link_bandwidth.h"

#include "absl/time/time.h"
#include "common/time/proto_time.h"

namespace baton {

double LinkBandwidth(const baton::v1::LinkMeasurement& link) {
  const double seconds = absl::ToDoubleSeconds(FromProto(link.duration()));
  if (!link.error().empty() || seconds <= 0) return 0;
  return static_cast<double>(link.bytes()) / seconds;
}

}  // namespace baton
