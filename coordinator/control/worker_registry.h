#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"
#include "coordinator/control/worker_state.h"
#include "coordinator/policy/lease.h"

namespace baton::coordinator {

// The coordinator's end of one worker stream. Thread-safe, never blocks.
class WorkerChannel {
 public:
  virtual ~WorkerChannel() = default;
  // Queues a message; false if the stream is gone.
  virtual bool Send(const baton::v1::CoordinatorMessage& msg) = 0;
  // Ends the stream with `status` (the worker sees it and reconnects or gives up).
  virtual void Close(const absl::Status& status) = 0;
};

// Every worker the coordinator has heard from since it started, with its liveness and
// lease.
//
// A worker is connected while its current stream is open and its lease holds, LOST
// otherwise. A connected worker is READY (schedulable) or DRAINING (it is leaving: it keeps
// its stream and reports, but gets no new work). Each connection is a session; messages and
// disconnects of an older session of the same worker are ignored (a reconnect supersedes
// the old stream).
//
// Leases (protocol >= 3): registering and every heartbeat of the current session renew the
// worker's lease (the coordinator acknowledges them); a worker kills its processes when
// its lease runs out. So once a worker is no longer connected, its processes are certainly
// stopped at LeaseExpiry(): the last renewal + lease + margin, or, for a worker this process
// never heard from (after a coordinator restart), its start + lease + margin (the previous
// process may have renewed a lease just before it died). Workers of older protocols have
// no lease: their processes count as stopped once they are lost, as before leases.
//
// Threading: not thread-safe; called from the coordinator's event loop only.
class WorkerRegistry {
 public:
  // `clock` must outlive this object.
  explicit WorkerRegistry(const Clock* clock, LeaseOptions lease = LeaseOptions());

  // OK if the worker may register now; UNAVAILABLE while its lease is revoked (Revoke),
  // naming until when and why.
  absl::Status Admit(const std::string& worker_id) const;
  // Records a (re)connected worker (DRAINING if reg.draining, else READY), renews its lease
  // and returns its new session id. An older session of the same worker is closed. `host`
  // is what other workers dial (MASTER_ADDR).
  uint64_t Connect(const baton::v1::Register& reg, const std::string& host,
                   std::shared_ptr<WorkerChannel> channel);
  // Marks the worker LOST if `session` is still its current one; returns whether it was.
  bool Disconnect(const std::string& worker_id, uint64_t session);
  // True if `session` is the worker's current, connected session.
  bool IsCurrent(const std::string& worker_id, uint64_t session) const;
  // Records a heartbeat of the current session and renews the lease. True if the caller
  // must acknowledge it (HeartbeatAck): a current session of a worker with leases.
  bool Heartbeat(const std::string& worker_id, uint64_t session);
  // Marks connected workers not heard from for lease + margin LOST (their lease has
  // certainly expired), closes their streams, and returns their ids.
  std::vector<std::string> ExpireLeases();
  // Fences a worker whose processes did not stop when asked: marks it LOST, closes its
  // stream and refuses its registration (Admit) until its lease has certainly expired,
  // which kills them. No-op for a worker without leases or not connected.
  void Revoke(const std::string& worker_id, const std::string& why);
  // When the worker's processes are certainly stopped if it is not connected (see the
  // class comment); InfiniteFuture while it is connected, InfinitePast for a lost worker
  // without leases.
  absl::Time LeaseExpiry(const std::string& worker_id) const;
  // Not connected and LeaseExpiry() has passed.
  bool ProcessesStopped(const std::string& worker_id) const;
  const LeaseOptions& lease() const { return lease_; }

  // Sends to a connected worker; false if it is unknown, LOST, or its stream is gone.
  bool Send(const std::string& worker_id, const baton::v1::CoordinatorMessage& msg);

  // READY: connected and schedulable.
  bool IsReady(const std::string& worker_id) const;
  // READY or DRAINING: its stream is up, so its processes' exits will be reported.
  bool IsConnected(const std::string& worker_id) const;
  // READY -> DRAINING; false (nothing changes) if the worker is not READY.
  bool SetDraining(const std::string& worker_id);
  // Register.protocol_version of the worker's latest session; 0 if unknown.
  uint32_t ProtocolVersion(const std::string& worker_id) const;
  // When the worker last heartbeated (or registered); InfinitePast if unknown.
  absl::Time LastHeartbeat(const std::string& worker_id) const;
  // Whether the worker's latest session has leases (protocol >= 3).
  bool HasLease(const std::string& worker_id) const;
  // When the worker's current session began; InfinitePast if unknown.
  absl::Time ConnectedSince(const std::string& worker_id) const;
  // The worker's dialable host; empty if unknown.
  std::string Host(const std::string& worker_id) const;
  // Register.probe_port of the worker's latest session; 0 if none or unknown.
  int ProbePort(const std::string& worker_id) const;
  // Slots of a READY worker (0 if not READY).
  int Slots(const std::string& worker_id) const;
  // Whether its slots are GPUs (it registered GPUs); false for unknown workers.
  bool HasGpus(const std::string& worker_id) const;
  // Ids of READY workers, sorted.
  std::vector<std::string> ReadyWorkers() const;

  // Health (pre-flight checks, policy/preflight.h): a worker marked unhealthy is left out
  // of new gangs until `until` (FreeCapacity), and shown with `reason` in List(); after
  // that it is schedulable again and the next gang it joins checks it. A later mark
  // replaces an earlier one. Unknown workers are ignored.
  void MarkUnhealthy(const std::string& worker_id, const std::string& reason, absl::Time until);
  // Whether the worker is marked unhealthy at the clock's now.
  bool IsUnhealthy(const std::string& worker_id) const;

  // Cordons (ClusterService.CordonWorker): a cordoned worker gets no new gangs
  // (FreeCapacity) and shows its cordon in List(). Kept for any worker id, seen or not (a
  // cordon outlives the coordinator and applies when the worker connects). The caller
  // makes them durable first.
  void SetCordon(const baton::v1::WorkerCordon& cordon);
  void ClearCordon(const std::string& worker_id);
  bool IsCordoned(const std::string& worker_id) const { return cordons_.count(worker_id) > 0; }
  const std::map<std::string, baton::v1::WorkerCordon>& cordons() const { return cordons_; }
  // Whether this coordinator has heard from the worker since it started.
  bool Known(const std::string& worker_id) const { return workers_.count(worker_id) > 0; }
  // All workers as the API shows them (used_slots/job_ids left for the caller to fill).
  std::vector<baton::v1::Worker> List() const;
  // Events the worker lifecycle refused (a Drain of a worker that is not READY, a Lose of
  // one that is not connected: races of a closing stream, no-ops), by event name
  // (WorkerEventName). For metrics.
  const std::map<std::string, int64_t>& refused_events() const { return refused_events_; }

 private:
  struct Entry {
    WorkerState state = WorkerState::kNew;  // info.state() mirrors it.
    baton::v1::Worker info;
    std::shared_ptr<WorkerChannel> channel;
    uint64_t session = 0;
    // Its last heartbeat or registration: also when its lease was last renewed.
    absl::Time last_heartbeat;
    absl::Time connected = absl::InfinitePast();
    uint32_t protocol_version = 0;
    bool leased = false;
    int probe_port = 0;
    absl::Time revoked_until = absl::InfinitePast();
    std::string revoked_why;
    absl::Time unhealthy_until = absl::InfinitePast();
    std::string unhealthy_reason;
  };

  // Moves `e` by `event` (worker_state.h) and mirrors the state into e.info; false (`e`
  // unchanged, the refusal counted) where the lifecycle has no such transition.
  bool Apply(Entry& e, WorkerEvent event);
  // Marks a connected entry LOST and closes its stream with `status`.
  void Lose(Entry& e, const absl::Status& status);

  const Clock* const clock_;
  const LeaseOptions lease_;
  const absl::Time start_;
  std::map<std::string, Entry> workers_;
  uint64_t next_session_ = 1;
  std::map<std::string, int64_t> refused_events_;  // by event name
  std::map<std::string, baton::v1::WorkerCordon> cordons_;  // by worker id
};

}  // namespace baton::coordinator
