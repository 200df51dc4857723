#pragma once

// Leadership among coordinator replicas on etcd (docs/ARCHITECTURE.md, "Coordinator
// replicas on etcd"). The leader holds one key, bound to an etcd lease it renews; its
// value is the leader's advertised address (what standbys name in their redirects). Every
// write the leader makes is fenced on that key's create revision (EtcdStore), so a replica
// that lost the key writes nothing. The timing rules are coordinator/policy/election.h.
//
//   standby ──Campaign: key absent, created under a new lease──▶ leader
//   leader ──renewals unanswered for ttl - safety, or the lease gone──▶ on_lost (the daemon
//            exits at once: it stops acting before any standby can hold the key)
//   leader ──Resign (SIGTERM, a rolling update)──▶ the lease revoked: a standby leads at once
//
// Thread-safe. Campaign blocks its caller; KeepLeading renews on a thread of its own.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"
#include "coordinator/policy/election.h"
#include "coordinator/store/etcd_kv.h"

namespace baton::coordinator {

struct LeaderElectionOptions {
  // The leader key, e.g. "/baton/leader".
  std::string key;
  // This replica's address as workers and clients dial it (HOST:PORT): the key's value
  // while it leads.
  std::string self;
  ElectionOptions timing;
  // How often a standby reads the key.
  absl::Duration poll = absl::Milliseconds(100);
};

class LeaderElection {
 public:
  // `kv`'s call timeout should be about timing.renew_every, so that a renewal that gets
  // no answer is retried before the next one is due. `clock` must outlive this object.
  LeaderElection(std::shared_ptr<EtcdKv> kv, LeaderElectionOptions options, Clock* clock);
  ~LeaderElection();

  // Blocks until this replica leads, and returns its fence; CANCELLED once Stop() is
  // called. etcd being unreachable is not an error here: a standby waits for it (logged
  // once per outage).
  absl::StatusOr<EtcdFence> Campaign();

  // The leader's address as last read ("" if none is known). This replica's own address
  // once it leads.
  std::string leader() const;
  // etcd calls that failed so far (campaign attempts, renewals). Thread-safe.
  int64_t etcd_errors() const { return etcd_errors_.load(); }

  // After Campaign won: renews the lease every timing.renew_every on a thread of its own,
  // and runs `on_lost` once, on that thread, when leadership may be lost: etcd answered
  // that the lease expired, or MustStepDown (no renewal answered for ttl - safety since the
  // send of the last answered one). Nothing is renewed after that.
  void KeepLeading(std::function<void(const absl::Status&)> on_lost);

  // Stops campaigning (Campaign returns CANCELLED); a leader goes on renewing, so that it
  // keeps the key while it shuts down (then Resign). Idempotent.
  void StopCampaign();
  // Stops campaigning and renewing. Idempotent; not from on_lost.
  void Stop();
  // Stop(), then, if this replica leads, revokes its lease so that the key goes at once and
  // a standby leads without waiting for the ttl. The caller has stopped acting as leader
  // before. Idempotent; not from on_lost.
  absl::Status Resign();

 private:
  // One attempt at the key: the fence if won; ALREADY_EXISTS (leader() updated) if held.
  absl::StatusOr<EtcdFence> TryOnce();
  void RenewLoop(std::function<void(const absl::Status&)> on_lost);
  // Waits until `deadline` or until `*stop` (guarded by mu_); returns false once it is set.
  bool WaitUntil(absl::Time deadline, const bool* stop);

  const std::shared_ptr<EtcdKv> kv_;
  const LeaderElectionOptions options_;
  Clock* const clock_;
  mutable absl::Mutex mu_;
  std::string leader_ ABSL_GUARDED_BY(mu_);
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;           // Stop(): no campaign, no renewal
  bool campaign_stopped_ ABSL_GUARDED_BY(mu_) = false;  // StopCampaign() or Stop()
  int64_t lease_ ABSL_GUARDED_BY(mu_) = 0;              // while leading
  // The send time of the last renewal etcd answered (or of the grant).
  absl::Time last_renewal_sent_ ABSL_GUARDED_BY(mu_);
  std::atomic<int64_t> etcd_errors_{0};
  std::thread renewer_;
};

}  // namespace baton::coordinator
