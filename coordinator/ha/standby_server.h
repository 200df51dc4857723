#pragma once

// What a standby coordinator replica serves on the coordinator's address while another
// leads: every baton.v1 call (and any other but health) is answered at once with
// UNAVAILABLE, "baton-coordinator <self> is a standby; the leader is <leader>", and the
// leader's address in the trailing metadata `baton-leader` (common/net/coordinator_addresses.h;
// absent while no leader is known). grpc.health.v1 says NOT_SERVING for
// baton.v1.JobService and baton.v1.WorkerService (so probes route traffic to the leader),
// SERVING overall (the process is alive). Workers and clients with several addresses follow
// the hint; see docs/ARCHITECTURE.md.
//
// The redirect is answered to any caller, before authentication: it reveals only the
// leader's address, which every replica's clients are configured with anyway.

#include <grpcpp/grpcpp.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/health/health_port.h"

namespace baton::coordinator {

struct StandbyServerOptions {
  std::string listen;         // the coordinator's gRPC address (HOST:PORT; port 0 picks one)
  std::string health_listen;  // the plaintext health address, or empty
  std::string self;           // this replica's address, named in the refusals (see set_self)
  // The leader's address now ("" if none is known); called on gRPC's threads.
  std::function<std::string()> leader;
};

class StandbyServer {
 public:
  // UNAVAILABLE if an address cannot be bound.
  static absl::StatusOr<std::unique_ptr<StandbyServer>> Start(
      StandbyServerOptions options, std::shared_ptr<grpc::ServerCredentials> credentials);
  ~StandbyServer();

  int port() const { return port_; }
  // Sets the address named in the refusals (when it is known only once the port is bound).
  void set_self(const std::string& self);
  int health_port() const { return health_port_ == nullptr ? 0 : health_port_->port(); }
  // Stops serving and frees the addresses (for the leader's server to bind). Idempotent.
  void Shutdown();

 private:
  class Redirect;
  explicit StandbyServer(StandbyServerOptions options);

  const StandbyServerOptions options_;
  mutable absl::Mutex mu_;
  std::string self_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<Redirect> redirect_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<HealthPort> health_port_;
  int port_ = 0;
};

}  // namespace baton::coordinator
