#pragma once

// The timing rules of coordinator leadership on etcd (docs/ARCHITECTURE.md, "Coordinator
// replicas on etcd"). A leader holds the leader key under an etcd lease of `ttl`, renewed
// every `renew_every`. etcd expires the lease `ttl` after the last renewal it *received*;
// the leader only knows when it *sent* the ones that were answered. So it must stop acting
// (answer UNAVAILABLE, send nothing, close its streams) before `ttl` has passed since the
// send of the last answered renewal, less `safety` for its own clock running slow against
// etcd's: from then on a standby may hold the key. Pure; the election applies it.

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace baton::coordinator {

struct ElectionOptions {
  // The etcd lease the leader key is bound to. Failover after a crash takes about this
  // long (plus the standby's election and the workers' reconnect): it must stay below the
  // worker lease, or ranks stop. A leader steps down when etcd has answered no renewal for
  // ttl - safety: 2 s gives 1.5 s, enough for a slow answer but not for etcd's own leader
  // election (about 1-2 s), which a 3 s ttl rides out (recommended with etcd members on
  // other machines; deploy/k8s uses it).
  absl::Duration ttl = absl::Seconds(2);
  // How often the leader renews it (several renewals per ttl ride out a lost one).
  absl::Duration renew_every = absl::Milliseconds(500);
  // Taken off the ttl for the leader's clock running slow against etcd's.
  absl::Duration safety = absl::Milliseconds(500);
};

// OK, or INVALID_ARGUMENT naming the option: ttl at least 2 s (etcd counts whole seconds
// and refuses shorter leases in practice) and below `worker_lease` (a failover must not
// stop ranks); renew_every > 0 and at most ttl / 3; safety >= 0 and below ttl -
// renew_every (else the leader would stop before its first renewal could land).
absl::Status ValidateElectionOptions(const ElectionOptions& options, absl::Duration worker_lease);

// Until when a leader whose last answered renewal was *sent* at `last_renewal_sent` may
// act: last_renewal_sent + ttl - safety.
absl::Time LeadUntil(absl::Time last_renewal_sent, const ElectionOptions& options);

// Whether a leader must stop acting at `now`.
bool MustStepDown(absl::Time last_renewal_sent, absl::Time now, const ElectionOptions& options);

}  // namespace baton::coordinator
