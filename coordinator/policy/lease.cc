#include "coordinator/policy/lease.h"

namespace baton::coordinator {

absl::Time LeaseCertainlyExpired(absl::Time renewed, const LeaseOptions& options) {
  return renewed + options.lease + options.margin;
}

bool LeaseExpiredAt(absl::Time renewed, absl::Time now, const LeaseOptions& options) {
  return now > LeaseCertainlyExpired(renewed, options);
}

absl::Time ProcessesDeadAfter(const LeaseFacts& facts, absl::Time coordinator_start,
                              const LeaseOptions& options) {
  if (!facts.known) return LeaseCertainlyExpired(coordinator_start, options);
  if (facts.connected) return absl::InfiniteFuture();
  if (!facts.leased) return absl::InfinitePast();
  return LeaseCertainlyExpired(facts.renewed, options);
}

}  // namespace baton::coordinator
