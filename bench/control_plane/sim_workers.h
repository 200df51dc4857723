#pragma once

// Simulated worker daemons for control-plane load tests: N workers in one process, each
// with its own WorkerService.Connect stream to a real coordinator, speaking the protocol
// as worker/agent/agent.cc does, but running nothing. They register, heartbeat, answer
// ReservePort with a fake port and StartAssignment with AssignmentStarted (fake pids),
// report a metric point per rank at a fixed period, and report their ranks' exits when
// told to finish (code 0) or when stopped (StopAssignment: SIGTERM).
//
// With `reconnect`, a worker whose stream ends (not by Stop() or while silenced) comes back
// as the real agent does after a coordinator restart or a leader's failover
// (sim_reconnect.h): it finds the leader, retries, opens a new stream and re-registers
// listing its running assignment, which the coordinator re-attaches.
//
// Threads: no thread per worker. Streams use gRPC's callback API (its own small executor);
// one ticker thread sends heartbeats and metric points when due; with `reconnect`, one
// reconnect thread finds the leader (one LeaderFinder for the cluster: one Find per round
// of due workers and leader hint, where each real worker would probe on its own) and opens
// the streams of workers due to reconnect. Workers are spread over several channels (each
// its own HTTP/2 connection) of at most workers_per_channel streams, per replica.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/control_plane/sim_reconnect.h"
#include "common/net/coordinator_addresses.h"

namespace baton::bench {

struct SimOptions {
  // The coordinator's replicas (HOST:PORT each), plaintext; at least one. The workers
  // register with the one that leads (grpc.health.v1 SERVING for baton.v1.WorkerService);
  // a single address is dialled without a probe, as the agent does.
  std::vector<std::string> coordinators;
  int workers = 1;
  // Slots each worker offers (and ranks it runs of a job asking that many per worker).
  int slots = 1;
  // Streams per channel (HTTP/2 connection).
  int workers_per_channel = 100;
  // Worker ids are "<id_prefix><index>".
  std::string id_prefix = "sim-";
  // Heartbeat period until Registered says otherwise.
  absl::Duration heartbeat_interval = absl::Seconds(1);
  // One metric point per rank this often while an assignment runs; the step advances by
  // steps_per_point each time.
  absl::Duration metric_period = absl::Seconds(10);
  int64_t steps_per_point = 10;
  // A running assignment's ranks exit 0 after this many metric points; 0: only on
  // FinishAll().
  int64_t exit_after_points = 0;
  // false: a stream that ends (not by Stop() or while silenced) counts in failed_streams
  // and its worker is gone. true: the worker reconnects as the agent does (see above).
  bool reconnect = false;
  ReconnectOptions reconnect_options;
};

// What the simulated workers saw so far (a snapshot).
struct SimCounts {
  int registered = 0;      // Registered received
  int started = 0;         // workers that received a StartAssignment
  int failed_streams = 0;  // without reconnect: streams that ended before Stop(), a silenced
                           // one's aside
  int64_t heartbeats_sent = 0;
  int64_t heartbeat_acks = 0;
  int64_t metric_points_sent = 0;
  int64_t exits_sent = 0;
  int64_t stops_received = 0;
  absl::Time last_start_received = absl::InfinitePast();  // the latest StartAssignment
  // With reconnect:
  int64_t streams_lost = 0;        // streams that ended, their worker then reconnecting
  int64_t reconnect_attempts = 0;  // streams opened after a worker's first
  int64_t election_retries = 0;    // attempts put off by election_retry (no leader yet)
  int64_t reregistrations = 0;     // Registered received on a worker's later stream
  absl::Time last_reregistration = absl::InfinitePast();  // the latest of those
};

class SimWorker;

// Owns the simulated workers. Thread-safe.
class SimCluster {
 public:
  explicit SimCluster(SimOptions options);
  ~SimCluster();  // Stop()

  // Finds the leader (with several addresses: probes them, at most probe_timeout each),
  // opens every worker's stream to it and sends its Register. Returns then; see Counts()
  // and AwaitRegistered(). FAILED_PRECONDITION if called twice; UNAVAILABLE (LeaderFinder's,
  // naming each address's answer) if no replica leads.
  absl::Status Start();

  // Waits until every worker received Registered: DEADLINE_EXCEEDED (with the count) at
  // `deadline`, UNAVAILABLE if a stream ended first.
  absl::Status AwaitRegistered(absl::Time deadline);

  // Waits until `n` workers received a StartAssignment; DEADLINE_EXCEEDED at `deadline`.
  absl::Status AwaitStarted(int n, absl::Time deadline);

  // Waits until `n` StopAssignments were received; DEADLINE_EXCEEDED at `deadline`.
  absl::Status AwaitStopped(int64_t n, absl::Time deadline);

  // Waits until Counts().reregistrations >= `n`; DEADLINE_EXCEEDED at `deadline`.
  absl::Status AwaitReregistrations(int64_t n, absl::Time deadline);

  // When each worker (by index) last received Registered; InfinitePast if never.
  std::vector<absl::Time> LastRegistrations() const;

  // Every running assignment's ranks report ProcessExited code 0.
  void FinishAll();

  // One worker running an assignment (the highest-numbered) goes silent, as if
  // partitioned: its stream stays open, it sends nothing more (no heartbeat, point or exit)
  // and ignores what it receives. FAILED_PRECONDITION if no worker runs an assignment.
  struct Silenced {
    int index;
    absl::Time last_heartbeat;  // its last heartbeat sent (the lease counts from there)
  };
  absl::StatusOr<Silenced> SilenceOne();

  // Stops the ticker and the reconnects, cancels every stream and waits until gRPC is
  // done with them.
  void Stop();

  SimCounts Counts() const;

 private:
  friend class SimWorker;
  void TickerLoop();
  void ReconnectLoop();
  // Opens worker `index`'s stream to the leader, or puts it off (RetryDelay).
  void ReconnectRound(const std::vector<int>& due);

  // Called by the workers (from gRPC's threads).
  void OnRegistered(absl::Time when, bool first);
  void OnStarted(absl::Time when, bool first);
  void OnStreamOpened();
  // A stream is over: failed (counted unless stopping), or its worker reconnects at `at`.
  void OnStreamEnded(bool failed, std::optional<absl::Time> reconnect_at, int index);
  void Count(int64_t SimCounts::*counter, int64_t n);

  const SimOptions options_;
  // Outlive the workers' streams.
  SimChannels channels_;
  LeaderFinder finder_;
  std::vector<std::unique_ptr<SimWorker>> workers_;  // fixed once Start() made them
  std::thread ticker_;
  std::thread reconnector_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  SimCounts counts_ ABSL_GUARDED_BY(mu_);
  int open_streams_ ABSL_GUARDED_BY(mu_) = 0;  // started, gRPC not yet done with them
  // Workers due to reconnect: when, by index (at most one entry per worker).
  std::map<int, absl::Time> due_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::bench
