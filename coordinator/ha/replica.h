#pragma once

// One baton-coordinator replica of several on one etcd (--store=etcd://...): a standby
// (StandbyServer: redirects to the leader) until it wins the election, then the
// coordinator itself (CoordinatorServer on an EtcdStore fenced on its leadership), on the
// same address. See docs/ARCHITECTURE.md, "Coordinator replicas on etcd".
//
//   Start ──▶ standby ──won──▶ leading ──lost (etcd unreachable past ttl - safety, lease
//                                         gone) or the store failed──▶ the process exits
//   Shutdown (SIGTERM): a leader stops serving, then resigns: a standby leads at once.
//
// A leader that loses leadership does not go back to standby: it exits (on_lost), so that
// everything it held (streams, in-memory state) goes with it, and is restarted as a new
// standby by its supervisor (Kubernetes, systemd).

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "common/security/tls.h"
#include "common/time/clock.h"
#include "coordinator/ha/etcd_target.h"
#include "coordinator/ha/leader_election.h"
#include "coordinator/ha/standby_server.h"
#include "coordinator/policy/election.h"
#include "coordinator/server/role_metrics.h"
#include "coordinator/server/server.h"

namespace baton::coordinator {

struct ReplicaOptions {
  // The coordinator's options; `state_dir` holds this replica's metric points and log
  // lines (history.db), `open_store` is replaced.
  ServerOptions server;
  EtcdTarget etcd;
  // TLS to etcd: `ca` set means TLS (cert/key: the client certificate, if etcd asks one).
  TlsFiles etcd_tls;
  // This replica's address as workers and clients dial it (HOST:PORT): the leader key's
  // value, named in the standbys' redirects. Empty: --listen's host with the bound port,
  // which must then not be a wildcard (0.0.0.0, ::).
  std::string advertise;
  ElectionOptions election;
  // Runs once, on the election's thread, when leadership may be lost. Default: log and
  // exit the process at once (std::_Exit(1)).
  std::function<void(const absl::Status&)> on_lost;
};

class CoordinatorReplica {
 public:
  // `clock` must outlive this object.
  CoordinatorReplica(ReplicaOptions options, Clock* clock);
  ~CoordinatorReplica();

  // Checks the options, connects to etcd, serves as a standby and campaigns on a thread.
  // INVALID_ARGUMENT for bad options, UNAVAILABLE when the address cannot be bound.
  absl::Status Start();
  // The bound gRPC and health ports (after Start; the leader serves on the same ones).
  int port() const { return port_; }
  int health_port() const { return health_port_; }
  // The bound metrics port (after Start; 0 without --metrics_listen): a standby's /metrics
  // (baton_coordinator_leader 0), then the leader's, on the same port.
  int metrics_port() const { return metrics_port_; }
  // True once the leader's coordinator halted. Thread-safe.
  bool halted() const;
  // A leader re-reads its token file (CoordinatorServer::ReloadTokens); a standby reads it
  // when it comes to lead, so there is nothing to do (OK).
  absl::Status ReloadTokens();
  // Likewise for the queue file (CoordinatorServer::ReloadQueues).
  absl::Status ReloadQueues();
  // Stops campaigning; a leader stops serving, then resigns. Idempotent.
  void Shutdown();

 private:
  void Run();
  // A standby's /metrics on --metrics_listen (a failure is logged, not fatal).
  absl::Status ServeStandbyMetrics();
  // The leader's server on the standby's ports, over an EtcdStore fenced on `fence`.
  absl::Status Lead(const EtcdFence& fence);

  const ReplicaOptions options_;
  Clock* const clock_;
  std::shared_ptr<grpc::ServerCredentials> credentials_;
  std::shared_ptr<EtcdKv> store_kv_;          // the store's calls: call_timeout 5 s
  std::unique_ptr<LeaderElection> election_;  // its own client: renewals time out fast
  std::atomic<const LeaderElection*> election_ready_{nullptr};  // for the standby's threads
  std::unique_ptr<StandbyServer> standby_;
  std::shared_ptr<StandbyMetrics> standby_metrics_;
  // Serves standby_metrics_, then the leader's metrics; stopped first.
  std::unique_ptr<prometheus::Exposer> exposer_;
  int metrics_port_ = 0;
  int port_ = 0;
  int health_port_ = 0;
  mutable absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<CoordinatorServer> server_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace baton::coordinator
