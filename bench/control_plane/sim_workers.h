#pragma once

// Simulated worker daemons for control-plane load tests: N workers in one process, each
// with its own WorkerService.Connect stream to a real coordinator, speaking the protocol
// as worker/agent/agent.cc does, but running nothing. They register, heartbeat, answer
// ReservePort with a fake port and StartAssignment with AssignmentStarted (fake pids),
// report a metric point per rank at a fixed period, and report their ranks' exits when
// told to finish (code 0) or when stopped (StopAssignment: SIGTERM).
//
// Threads: no thread per worker. Streams use gRPC's callback API (its own small executor);
// one ticker thread sends heartbeats and metric points when due. Workers are spread over
// several channels (each its own HTTP/2 connection) of at most workers_per_channel
// streams.

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace baton::bench {

struct SimOptions {
  // The coordinator's address (HOST:PORT), plaintext.
  std::string coordinator;
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
};

// What the simulated workers saw so far (a snapshot).
struct SimCounts {
  int registered = 0;      // Registered received
  int started = 0;         // workers that received a StartAssignment
  int failed_streams = 0;  // streams that ended before Stop(), a silenced one's aside
  int64_t heartbeats_sent = 0;
  int64_t heartbeat_acks = 0;
  int64_t metric_points_sent = 0;
  int64_t exits_sent = 0;
  int64_t stops_received = 0;
  absl::Time last_start_received = absl::InfinitePast();  // the latest StartAssignment
};

class SimWorker;
struct SimTransport;

// Owns the simulated workers. Thread-safe.
class SimCluster {
 public:
  explicit SimCluster(SimOptions options);
  ~SimCluster();  // Stop()

  // Opens every worker's stream and sends its Register. Returns at once; see Counts() and
  // AwaitRegistered(). FAILED_PRECONDITION if called twice.
  absl::Status Start();

  // Waits until every worker received Registered: DEADLINE_EXCEEDED (with the count) at
  // `deadline`, UNAVAILABLE if a stream ended first.
  absl::Status AwaitRegistered(absl::Time deadline);

  // Waits until `n` workers received a StartAssignment; DEADLINE_EXCEEDED at `deadline`.
  absl::Status AwaitStarted(int n, absl::Time deadline);

  // Waits until `n` StopAssignments were received; DEADLINE_EXCEEDED at `deadline`.
  absl::Status AwaitStopped(int64_t n, absl::Time deadline);

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

  // Cancels every stream and waits until gRPC is done with them; stops the ticker.
  void Stop();

  SimCounts Counts() const;

 private:
  friend class SimWorker;
  void TickerLoop();

  // Called by the workers (from gRPC's threads).
  void OnRegistered();
  void OnStarted(absl::Time when, bool first);
  void OnStreamEnded();
  void OnDone();
  void Count(int64_t SimCounts::*counter, int64_t n);

  const SimOptions options_;
  std::unique_ptr<SimTransport> transport_;  // channels and stubs; outlives the workers
  std::vector<std::unique_ptr<SimWorker>> workers_;
  std::thread ticker_;

  mutable absl::Mutex mu_;
  bool started_ ABSL_GUARDED_BY(mu_) = false;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  SimCounts counts_ ABSL_GUARDED_BY(mu_);
  int done_ ABSL_GUARDED_BY(mu_) = 0;  // streams gRPC finished with (OnDone)
};

}  // namespace baton::bench
