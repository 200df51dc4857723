#pragma once

// Test doubles for the leader protocol of coordinator replicas
// (common/net/coordinator_addresses.h): what a replica tells its clients about leadership.

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace baton {

// A replica's role as its clients see it, as a generic service to register on a test's
// gRPC server. It answers every method the server has no registered service for:
// - grpc.health.v1.Health/Check: "" SERVING; kJobServiceName and kWorkerServiceName
//   SERVING for a leader, NOT_SERVING for a standby; any other service NOT_FOUND;
// - any other method: a standby's refusal (Refusal()); a leader's UNIMPLEMENTED (a test
//   registers the services its leader really serves, whose handlers call Refusal()).
// Starts as a leader. Every call is counted. Thread-safe.
class ReplicaRole final : public grpc::CallbackGenericService {
 public:
  ReplicaRole() = default;

  // This replica's address, named in a standby's refusals.
  void set_self(const std::string& address);
  void BecomeLeader();
  // A standby naming `leader` (HOST:PORT), or none yet (nullopt).
  void BecomeStandby(std::optional<std::string> leader);
  // While true, Health/Check is never answered (a stuck replica): the call ends at its
  // deadline or cancellation.
  void set_hang_checks(bool hang);
  // While true, Health/Check answers as a leader's whatever the role: a probe that saw the
  // replica lead just before it stepped down, so that the call after it is refused.
  void set_checks_report_leader(bool lagging);

  bool is_leader() const;
  // For a registered service's handler, before it does anything: OK on a leader; on a
  // standby UNAVAILABLE "baton-coordinator SELF is a standby; the leader is LEADER" (or
  // "...; no leader is elected yet"), with kLeaderMetadataKey added to `context`'s
  // trailing metadata when a leader is known.
  grpc::Status Refusal(grpc::ServerContextBase* context) const;

  // Calls of `method` ("/grpc.health.v1.Health/Check", "/baton.v1.JobService/GetJob", ...)
  // that reached this service so far.
  int calls(const std::string& method) const;

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override;

 private:
  class Call;

  mutable absl::Mutex mu_;
  std::string self_ ABSL_GUARDED_BY(mu_);
  bool leader_ ABSL_GUARDED_BY(mu_) = true;
  std::optional<std::string> known_leader_ ABSL_GUARDED_BY(mu_);
  bool hang_checks_ ABSL_GUARDED_BY(mu_) = false;
  bool checks_report_leader_ ABSL_GUARDED_BY(mu_) = false;
  std::map<std::string, int> calls_ ABSL_GUARDED_BY(mu_);
};

// A replica that serves nothing but its role: a plaintext gRPC server on 127.0.0.1 with a
// ReplicaRole (a leader answers every baton.v1.* call UNIMPLEMENTED, after counting it).
class FakeReplica {
 public:
  // Listening on 127.0.0.1:`port` (0: the OS picks) when it returns; aborts if it cannot.
  explicit FakeReplica(int port = 0);
  ~FakeReplica();  // Shutdown().
  FakeReplica(const FakeReplica&) = delete;
  FakeReplica& operator=(const FakeReplica&) = delete;

  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  ReplicaRole& role() { return role_; }
  // Stops listening (connections to the port are refused from then on). Idempotent.
  void Shutdown();

 private:
  ReplicaRole role_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
  std::string address_;
};

}  // namespace baton
