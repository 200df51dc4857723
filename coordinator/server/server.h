#pragma once

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/health/health_port.h"
#include "common/security/tls.h"
#include "common/spec/job_spec.h"
#include "common/time/clock.h"
#include "coordinator/auth/access_policy.h"
#include "coordinator/auth/authenticator.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/control/worker_registry.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/server/event_loop.h"
#include "coordinator/server/metrics.h"
#include "coordinator/server/services.h"
#include "coordinator/store/state_dir_lock.h"
#include "coordinator/store/store.h"
#include "coordinator/store/watched_store.h"

namespace baton::coordinator {

struct ServerOptions {
  // gRPC address, e.g. "0.0.0.0:7070"; port 0 picks a free port (see port()).
  std::string listen = "0.0.0.0:7070";
  // TLS (server certificate and key; `tls.ca` is the cluster CA worker certificates must
  // chain to), or, with `insecure`, plaintext: then `listen` must be a loopback address.
  TransportSecurity security;
  // Plaintext address serving only grpc.health.v1 (the same statuses as `listen`), for
  // probes that cannot speak TLS, e.g. Kubernetes' gRPC probes. Empty: none.
  std::string health_listen;
  // The users' tokens (Authenticator). Required with TLS; without TLS and without a token
  // file every caller is an anonymous admin.
  std::string token_file;
  // The queue file (coordinator/queues/queue_file.h): with one, jobs are admitted through
  // queues with quotas, priorities, fair share and preemption; without, first come, first
  // served. Read at Start (an error fails the start) and by ReloadQueues.
  std::string queue_file;
  AccessOptions access;
  // Bounds on the users' open WatchJob/GetLogs streams (per user, in total).
  UserStreamLimits streams;
  // Jobs one user may have that have not ended (JobManagerOptions); 0: no limit.
  int max_jobs_per_user = 100;
  // Directory of the SQLite state file (created if missing).
  std::string state_dir = "baton-state";
  // How often the control loop runs ReconcileOnce.
  absl::Duration reconcile_period = absl::Milliseconds(100);
  // Prometheus /metrics address, e.g. "0.0.0.0:7071"; port 0 picks a free port (see
  // metrics_port()); empty: no metrics endpoint. If it cannot be bound, the error is
  // logged and the coordinator serves without it.
  std::string metrics_listen;
  CoordinatorMetricsOptions metrics;
  CoordinatorOptions coordinator;
  LeaseOptions lease;
  RetentionOptions retention;
  // Opens the state store at a path (default: Store::Open, SQLite).
  std::function<absl::StatusOr<std::unique_ptr<Store>>(const std::string& path)> open_store =
      &Store::Open;
  // Runs once, on the event loop, if the coordinator halts because its store failed
  // (Coordinator::halted()), after every health status was set to NOT_SERVING. The daemon
  // exits non-zero from here; a restart recovers from disk.
  std::function<void(const absl::Status&)> on_halt;
  // A store call running longer than this means the state directory hangs (a hung mount,
  // a dying disk): the event loop is stuck in it, so `on_store_stuck` runs (on a timer
  // thread; health is NOT_SERVING by then). It cannot shut down gracefully, since the loop
  // never returns: the daemon exits at once. Default (unset): on_halt.
  absl::Duration store_stall_limit = absl::Seconds(60);
  std::function<void(const absl::Status&)> on_store_stuck;
};

// The baton-coordinator daemon: store + domain objects + event loop + gRPC server
// (JobService, ClusterService, WorkerService, grpc.health.v1, reflection).
// Start() once, then Shutdown() (also done by the destructor).
class CoordinatorServer {
 public:
  // `clock` must outlive the server.
  CoordinatorServer(ServerOptions options, Clock* clock);
  ~CoordinatorServer();

  // Locks the state directory, opens the state, recovers jobs and starts serving. Errors:
  // another coordinator holds the directory (FAILED_PRECONDITION naming its pid), the state
  // file cannot be opened (UNAVAILABLE/FAILED_PRECONDITION), the address cannot be bound
  // (UNAVAILABLE).
  absl::Status Start();
  // The bound gRPC port (after Start).
  int port() const { return port_; }
  // The bound health_listen port (after Start); 0 if none.
  int health_port() const { return health_port_ == nullptr ? 0 : health_port_->port(); }
  // The bound metrics port (after Start); 0 if metrics are not served.
  int metrics_port() const { return metrics_port_; }
  // The metrics it serves (after Start), for an endpoint of the caller's (a replica keeps
  // one endpoint from standby to leader): register it there, with metrics_listen empty.
  std::shared_ptr<prometheus::Collectable> metrics() const { return metrics_; }
  // Closures waiting on the event loop (EventLoop::queued). Thread-safe.
  size_t event_loop_queued() const { return loop_ == nullptr ? 0 : loop_->queued(); }
  // True once the coordinator halted (see ServerOptions::on_halt). Thread-safe.
  bool halted() const { return halted_.load(); }
  // Re-reads the token file (SIGHUP); on error the previous tokens stay in force. Once
  // re-read, every open stream of a token the file no longer holds ends at once
  // (UNAUTHENTICATED).
  absl::Status ReloadTokens();
  // Re-reads the queue file (SIGHUP): once it parses and validates, the new set applies
  // from the next scheduling pass; on error the previous set stays in force. OK without a
  // queue file. Thread-safe.
  absl::Status ReloadQueues();
  // Stops accepting calls, cancels open streams after `grace`, stops the loop.
  void Shutdown(absl::Duration grace = absl::Seconds(1));

 private:
  // Start's steps: check the transport and load the tokens (before anything is touched);
  // lock and load the state and recover the jobs; the gRPC server (the domain must exist);
  // the metrics endpoint (a failure is logged, not fatal).
  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> PrepareSecurity();
  absl::Status OpenState();
  absl::Status Serve(std::shared_ptr<grpc::ServerCredentials> credentials);
  absl::Status ServeHealth();
  // Sets a health status on every server that serves health (service "" is the overall one).
  void SetHealth(const std::string& service, bool serving);
  void ServeMetrics();
  // Stops serving (halted(), every health status NOT_SERVING), then runs `handler`.
  void Halt(const absl::Status& why, const std::function<void(const absl::Status&)>& handler);

  const ServerOptions options_;
  Clock* const clock_;
  std::unique_ptr<StateDirLock> state_lock_;  // released after everything below
  std::unique_ptr<Store> store_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<EventLoop> loop_;
  std::shared_ptr<CoordinatorMetrics> metrics_;  // Reads the domain objects on loop_.
  std::unique_ptr<Authenticator> auth_;
  std::unique_ptr<AccessPolicy> access_;
  UserStreams user_streams_;  // Outlives the services that register streams in it.
  std::unique_ptr<JobServiceImpl> job_service_;
  std::unique_ptr<ClusterServiceImpl> cluster_service_;
  std::unique_ptr<WorkerServiceImpl> worker_service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HealthPort> health_port_;       // health_listen; null if none
  std::unique_ptr<prometheus::Exposer> exposer_;  // Serves metrics_; stopped first.
  int port_ = 0;
  int metrics_port_ = 0;
  std::atomic<bool> halted_{false};
};

}  // namespace baton::coordinator
