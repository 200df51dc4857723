#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/baton/v1/job.pb.h"
#include "proto/baton/v1/worker_service.pb.h"

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

// Every worker the coordinator has heard from since it started, with its liveness.
//
// A worker is connected while its current stream is open and heartbeats arrive within the
// timeout, LOST otherwise. A connected worker is READY (schedulable) or DRAINING (it is
// leaving: it keeps its stream and reports, but gets no new work). Each connection is a
// session; messages and disconnects of an older session of the same worker are ignored (a
// reconnect supersedes the old stream).
//
// Threading: not thread-safe; called from the coordinator's event loop only.
class WorkerRegistry {
 public:
  // `clock` must outlive this object.
  explicit WorkerRegistry(const Clock* clock);

  // Records a (re)connected worker (DRAINING if reg.draining, else READY) and returns its
  // new session id. An older session of the same worker is closed. `host` is what other
  // workers dial (MASTER_ADDR).
  uint64_t Connect(const baton::v1::Register& reg, const std::string& host,
                   std::shared_ptr<WorkerChannel> channel);
  // Marks the worker LOST if `session` is still its current one; returns whether it was.
  bool Disconnect(const std::string& worker_id, uint64_t session);
  // True if `session` is the worker's current, connected session.
  bool IsCurrent(const std::string& worker_id, uint64_t session) const;
  // Records a heartbeat of the current session.
  void Heartbeat(const std::string& worker_id, uint64_t session);
  // Marks connected workers whose last heartbeat is older than `timeout` LOST, closes their
  // streams, and returns their ids.
  std::vector<std::string> ExpireHeartbeats(absl::Duration timeout);

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
  // The worker's dialable host; empty if unknown.
  std::string Host(const std::string& worker_id) const;
  // Slots of a READY worker (0 if not READY).
  int Slots(const std::string& worker_id) const;
  // Ids of READY workers, sorted.
  std::vector<std::string> ReadyWorkers() const;
  // All workers as the API shows them (used_slots/job_ids left for the caller to fill).
  std::vector<baton::v1::Worker> List() const;

 private:
  struct Entry {
    baton::v1::Worker info;
    std::shared_ptr<WorkerChannel> channel;
    uint64_t session = 0;
    absl::Time last_heartbeat;
    uint32_t protocol_version = 0;
  };

  const Clock* const clock_;
  std::map<std::string, Entry> workers_;
  uint64_t next_session_ = 1;
};

}  // namespace baton::coordinator
