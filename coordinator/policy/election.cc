#include "coordinator/policy/election.h"

#include "absl/strings/str_cat.h"

namespace baton::coordinator {

absl::Status ValidateElectionOptions(const ElectionOptions& o, absl::Duration worker_lease) {
  if (o.ttl < absl::Seconds(2)) {
    return absl::InvalidArgumentError(absl::StrCat("election ttl: ", absl::FormatDuration(o.ttl),
                                                   " is too short; must be at least 2s"));
  }
  if (o.ttl >= worker_lease) {
    return absl::InvalidArgumentError(absl::StrCat(
        "election ttl: ", absl::FormatDuration(o.ttl), " must be below the worker lease (",
        absl::FormatDuration(worker_lease), "), or a failover stops every rank"));
  }
  if (o.renew_every <= absl::ZeroDuration() || o.renew_every > o.ttl / 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("election renew_every: ", absl::FormatDuration(o.renew_every),
                     " is outside (0, ttl / 3 = ", absl::FormatDuration(o.ttl / 3), "]"));
  }
  if (o.safety < absl::ZeroDuration() || o.safety >= o.ttl - o.renew_every) {
    return absl::InvalidArgumentError(absl::StrCat(
        "election safety: ", absl::FormatDuration(o.safety),
        " is outside [0, ttl - renew_every = ", absl::FormatDuration(o.ttl - o.renew_every), ")"));
  }
  return absl::OkStatus();
}

absl::Time LeadUntil(absl::Time last_renewal_sent, const ElectionOptions& options) {
  return last_renewal_sent + options.ttl - options.safety;
}

bool MustStepDown(absl::Time last_renewal_sent, absl::Time now, const ElectionOptions& options) {
  return now >= LeadUntil(last_renewal_sent, options);
}

}  // namespace baton::coordinator
