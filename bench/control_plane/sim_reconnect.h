#pragma once

// How a simulated worker (sim_workers.h) comes back after its stream ended, as baton-worker's
// agent does (worker/agent/agent.cc: SessionLoop, RunSession, MakeRegister): find the leader
// among the coordinator's replicas (LeaderFinder, the ended call's baton-leader hint first),
// retry every election_retry while an election is under way (ElectionUnderway) and after an
// exponential backoff otherwise, then open a new stream whose Register lists the worker's
// running assignment so that the coordinator re-attaches it. The pieces here are the parts
// of that which hold no stream: the backoff, the delay rule, the Register and the channels.

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/random/random.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "baton/v1/worker_service.grpc.pb.h"
#include "baton/v1/worker_service.pb.h"

namespace baton::bench {

// The agent's reconnect timings (AgentOptions and worker/agent/backoff.h, their defaults).
struct ReconnectOptions {
  // Reconnect backoff: initial, doubling (multiplier) up to max; each delay scaled by a
  // random factor in [1 - jitter, 1] so that workers cut off together spread out.
  absl::Duration backoff_initial = absl::Milliseconds(100);
  absl::Duration backoff_max = absl::Seconds(5);
  double backoff_multiplier = 2.0;
  double backoff_jitter = 0.2;
  // The retry period while replicas answer as standbys and none leads.
  absl::Duration election_retry = absl::Milliseconds(200);
  // Deadline of each health probe of a replica.
  absl::Duration probe_timeout = absl::Seconds(2);
};

// Exponential backoff with jitter, as the agent's Backoff (which //bench may not depend
// on). Not thread-safe: its worker's lock guards it.
class SimBackoff {
 public:
  explicit SimBackoff(const ReconnectOptions& options);

  // initial, initial * multiplier, ... capped at max, before jitter.
  absl::Duration Next();
  // After a registration: the next delay is initial again.
  void Reset() { next_ = options_.backoff_initial; }

 private:
  const ReconnectOptions options_;
  absl::Duration next_;
  absl::BitGen rng_;
};

// The delay before a worker's next connection attempt after one failed with `status`
// (LeaderFinder::Find's, or the ended stream's): options.election_retry while an election
// is under way (ElectionUnderway(status)), else backoff->Next().
absl::Duration RetryDelay(const absl::Status& status, const ReconnectOptions& options,
                          SimBackoff* backoff);

// A simulated worker's Register: `id` as its id and hostname, `slots` slots and cores, this
// build's protocol version, no probe port (peers skip probing it), and `running` as its
// assignments: each with its job id, generation and ranks, their pids set and no exit (the
// ranks still run), as the agent lists its ReportLedger snapshot.
baton::v1::WorkerMessage SimRegister(const std::string& id, int slots,
                                     const std::vector<baton::v1::AssignmentStatus>& running);

// Plaintext channels to the coordinator's replicas. Thread-safe.
class SimChannels {
 public:
  // Workers share a channel (one HTTP/2 connection) `per_channel` at a time.
  SimChannels(int per_channel, const ReconnectOptions& options);

  // The stub worker `worker_index` opens its stream to `address` with: that of its
  // channel to `address`, made on first use with a connection of its own. A channel in
  // TRANSIENT_FAILURE is replaced, as LeaderFinder::ChannelTo does: it would fail every
  // call until gRPC's own reconnect backoff let it try again, where the worker's attempt
  // should try to connect. A stub keeps its channel alive while a call holds it.
  std::shared_ptr<baton::v1::WorkerService::Stub> StubFor(const std::string& address,
                                                          int worker_index);

  // A channel to `address` whose own reconnect backoff does not add to the worker's
  // (gRPC's initial and maximum reconnect backoff set to the worker's), with a
  // connection of its own (no subchannel shared with other channels).
  std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address);

 private:
  struct Group {
    std::shared_ptr<grpc::Channel> channel;
    std::shared_ptr<baton::v1::WorkerService::Stub> stub;
  };

  const int per_channel_;
  const ReconnectOptions options_;
  absl::Mutex mu_;
  // By address, one per per_channel workers (by worker index / per_channel).
  std::map<std::string, std::map<int, Group>> groups_ ABSL_GUARDED_BY(mu_);
  int64_t made_ ABSL_GUARDED_BY(mu_) = 0;  // channels made: each its own connection
};

}  // namespace baton::bench
