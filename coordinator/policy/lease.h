#pragma once

// The worker lease, as the coordinator counts it (the worker's side: worker/agent/lease.h;
// the protocol: worker_service.proto, "Leases"). A worker's processes may run only while its
// lease holds: the worker kills them once `lease` passed on its own clock without a word
// from the coordinator, whatever the network does. The coordinator renews a lease with every
// heartbeat it acknowledges (and the registration), and counts it as certainly expired
// `margin` later than the worker would, so that a next generation never overlaps processes
// that may still run. Pure functions; WorkerRegistry (coordinator/control/worker_registry.h)
// applies them to its sessions, and DecideStop (recovery.h) decides when to revoke a lease.

#include "absl/time/time.h"

namespace baton::coordinator {

struct LeaseOptions {
  // How long a worker's processes may run without a word from the coordinator, and how
  // long the coordinator trusts a silent worker (see worker_service.proto, "Leases").
  absl::Duration lease = absl::Seconds(10);
  // Added on the coordinator's side before it counts a lease as certainly expired: covers
  // the worker noticing the expiry and its processes dying after SIGKILL.
  absl::Duration margin = absl::Seconds(1);
};

// When a lease last renewed at `renewed` has certainly expired, on the coordinator's clock:
// renewed + lease + margin.
absl::Time LeaseCertainlyExpired(absl::Time renewed, const LeaseOptions& options);

// Whether a connected worker silent since `renewed` is lost at `now`: strictly past
// LeaseCertainlyExpired.
bool LeaseExpiredAt(absl::Time renewed, absl::Time now, const LeaseOptions& options);

// What the coordinator knows of a worker, for ProcessesDeadAfter.
struct LeaseFacts {
  bool known = false;      // It registered with this coordinator.
  bool connected = false;  // Its stream is up (READY or DRAINING).
  bool leased = false;     // Its latest session has a lease (protocol >= 3).
  absl::Time renewed;      // The lease's last renewal (heartbeat or registration).
};

// From when the worker's processes are certainly dead:
//   - connected: never (InfiniteFuture): its processes report their own exits;
//   - known, lost, leased: LeaseCertainlyExpired(renewed);
//   - known, lost, without a lease (protocol < 3): at once (InfinitePast), as before leases;
//   - unknown (it may have held processes under a previous coordinator, which granted it a
//     lease before this one started): LeaseCertainlyExpired(coordinator_start).
absl::Time ProcessesDeadAfter(const LeaseFacts& facts, absl::Time coordinator_start,
                              const LeaseOptions& options);

}  // namespace baton::coordinator
