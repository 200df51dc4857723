#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"

namespace baton::worker {

// The worker's side of its lease (worker_service.proto, "Leases"): its training processes
// may run only while the lease holds. The coordinator grants it with Registered (from when
// the Register was sent) and renews it with each HeartbeatAck (from when that heartbeat
// was sent). Times are the caller's clock readings, so the lease never outlasts the
// coordinator's view of it: every renewal starts at a moment before the coordinator
// granted it.
//
// Until a coordinator grants a lease (or when it grants none: protocol < 3) there is no
// lease to lose and Valid() is true.
//
// Thread-safe.
class Lease {
 public:
  // A heartbeat is being sent at `sent`: returns its sequence number (1, 2, ...) for
  // Heartbeat.seq. Remembers the last kMaxOutstanding send times.
  uint64_t OnHeartbeatSent(absl::Time sent);
  // Registered arrived for a Register sent at `register_sent`, granting `lease` (zero or
  // negative: none). Replaces the lease; outstanding heartbeats of the old stream no
  // longer renew it.
  void OnRegistered(absl::Time register_sent, absl::Duration lease);
  // HeartbeatAck for `seq` arrived: the lease runs until that heartbeat's send time + lease
  // if that is later. Unknown or forgotten sequence numbers change nothing.
  void OnAck(uint64_t seq);

  // True if no lease was granted, or it holds at `now`.
  bool Valid(absl::Time now) const;
  // When the lease runs out; InfiniteFuture if none was granted.
  absl::Time expiry() const;
  // The granted lease; zero if none.
  absl::Duration duration() const;

  static constexpr size_t kMaxOutstanding = 1024;

 private:
  mutable absl::Mutex mu_;
  absl::Duration lease_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  absl::Time expiry_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, absl::Time> sent_ ABSL_GUARDED_BY(mu_);  // seq -> send time
};

// The worker's lease on /metrics:
//   baton_worker_lease_remaining_seconds   until the lease runs out unless renewed (absent
//                                          while no lease is held)
//   baton_worker_lease_expirations_total   times it ran out with processes, which were killed
class LeaseMetrics final : public prometheus::Collectable {
 public:
  // All must outlive this object; `expirations` must be thread-safe.
  LeaseMetrics(const Lease* lease, std::function<int64_t()> expirations, const Clock* clock)
      : lease_(lease), expirations_(std::move(expirations)), clock_(clock) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const Lease* const lease_;
  const std::function<int64_t()> expirations_;
  const Clock* const clock_;
};

}  // namespace baton::worker
