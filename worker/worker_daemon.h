#pragma once

// The baton-worker daemon as a class, as coordinator/server/server.h is the coordinator's:
// the ranks' launchers (a cgroup per rank where possible, the lease fence, warm standbys),
// the Supervisor, the Agent and its stream to the coordinator, the probe port, /metrics and
// the health port. worker_main.cc maps flags to WorkerDaemonOptions, starts it, and turns
// SIGTERM into Drain and a stop signal into Shutdown.

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "common/time/clock.h"
#include "worker/agent/agent.h"
#include "worker/process/standby_launcher.h"
#include "worker/supervisor/supervisor.h"

namespace baton::worker {

struct WorkerDaemonOptions {
  // The supervisor's; Start adds the rank cgroups' directory to secret_files.
  SupervisorOptions supervisor;
  // The agent's (credentials included); Start sets probe_port to the probe listener's.
  AgentOptions agent;
  StandbyLauncherOptions standby;
  // The probe listener's port (peers check reachability on it); 0 picks a free one.
  int probe_port = 0;
  // /metrics address (empty: none) and the file its port is written to (empty: none). A
  // port that cannot be bound is logged; the worker runs without metrics.
  std::string metrics_listen;
  std::string metrics_port_file;
  // Plaintext grpc.health.v1 address (empty: none), SERVING while the lease is valid.
  std::string health_listen;
};

// Start once, then optionally Drain, then Shutdown (the destructor does it if not done).
// Not thread-safe, except EndDrain, which may be called from another thread during Drain.
class WorkerDaemon {
 public:
  WorkerDaemon(WorkerDaemonOptions options, Clock* clock);
  ~WorkerDaemon();
  WorkerDaemon(const WorkerDaemon&) = delete;
  WorkerDaemon& operator=(const WorkerDaemon&) = delete;

  // Builds and starts everything, then connects to the coordinator. Requires the process
  // to be a child subreaper (prctl PR_SET_CHILD_SUBREAPER) with SIGCHLD blocked in every
  // thread: orphans are reaped by the daemon's reaper thread. Errors name the part that
  // failed (the probe port, the lease fence, the standby pool, the supervisor, metrics'
  // port file, the health port, the agent).
  absl::Status Start();

  // Tells the coordinator this worker drains, and waits until every assignment is gone
  // or `deadline`; true if it drained.
  bool Drain(const std::string& why, absl::Time deadline);
  // Ends a Drain in progress at once (from another thread).
  void EndDrain();
  size_t assignment_count() const;

  // Stops every training process (SIGTERM, `grace`, SIGKILL) while the stream is up, so
  // their exits reach the coordinator, then the agent.
  void Shutdown(absl::Duration grace);

 private:
  struct Parts;
  // /metrics with every collectable; OK (logged) if the port is taken; an error if its
  // port file cannot be written.
  absl::Status StartMetrics();

  WorkerDaemonOptions options_;
  Clock* const clock_;
  std::unique_ptr<Parts> parts_;
  bool started_ = false;  // Start returned OK.
  bool shut_down_ = false;
};

}  // namespace baton::worker
