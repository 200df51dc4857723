#pragma once

#include <grpcpp/grpcpp.h>

#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "baton/v1/worker_service.grpc.pb.h"
#include "common/net/testing/fake_replica.h"

namespace baton::worker {

// A stand-in coordinator for worker tests: a real gRPC WorkerService on 127.0.0.1 (port
// chosen by the OS) that records every WorkerMessage, answers Register with Registered, and
// lets the test send commands and break the stream. One stream at a time is "current".
// It also answers as a coordinator replica (role()): grpc.health.v1 reports
// baton.v1.WorkerService SERVING while it leads (the default); as a standby it refuses
// every Connect with UNAVAILABLE and the leader hint. Thread-safe.
class FakeCoordinator {
 public:
  using Predicate = std::function<bool(const baton::v1::WorkerMessage&)>;

  // Listening on 127.0.0.1:`port` (0: chosen by the OS) when it returns.
  explicit FakeCoordinator(int port = 0);
  ~FakeCoordinator();

  // HOST:PORT to pass to the worker.
  std::string address() const { return address_; }

  // Put into Registered.heartbeat_interval (unset if zero).
  void set_heartbeat_interval(absl::Duration interval);
  // When false, Register is recorded but answered by ending the stream with UNAVAILABLE.
  void set_accept_registrations(bool accept);
  // When false, Register is recorded and never answered: the stream stays open until the
  // worker gives up on it (a coordinator that hangs).
  void set_answer_registrations(bool answer);
  // Put into Registered.lease (unset if zero: no lease).
  void set_lease(absl::Duration lease);
  // Whether heartbeats are answered with HeartbeatAck (true at first): false is a
  // coordinator that went silent while the stream stays up.
  void set_ack_heartbeats(bool ack);

  // Removes and returns the oldest recorded message satisfying `pred`, waiting up to
  // `timeout` for one to arrive. Other messages stay recorded.
  std::optional<baton::v1::WorkerMessage> Next(const Predicate& pred,
                                               absl::Duration timeout = absl::Seconds(10));
  std::optional<baton::v1::WorkerMessage> Next(baton::v1::WorkerMessage::MsgCase kind,
                                               absl::Duration timeout = absl::Seconds(10));

  // Sends on the current (registered) stream; false if there is none or the write failed.
  bool Send(const baton::v1::CoordinatorMessage& message);
  // Ends the current stream from the server side.
  void BreakStream();
  // Streams that got Registered so far.
  int registrations() const;
  // Leader or standby (a role change does not end a stream in progress: BreakStream()).
  ReplicaRole& role() { return role_; }

 private:
  class Service;
  using ServerStream =
      grpc::ServerReaderWriter<baton::v1::CoordinatorMessage, baton::v1::WorkerMessage>;

  grpc::Status HandleConnect(grpc::ServerContext* context, ServerStream* stream);
  void Record(baton::v1::WorkerMessage message);

  std::unique_ptr<Service> service_;
  ReplicaRole role_;  // Health/Check and the standby's refusal; outlives server_.
  std::unique_ptr<grpc::Server> server_;
  std::string address_;

  mutable absl::Mutex mu_;
  absl::CondVar recorded_;
  std::deque<baton::v1::WorkerMessage> messages_ ABSL_GUARDED_BY(mu_);
  ServerStream* current_ ABSL_GUARDED_BY(mu_) = nullptr;
  grpc::ServerContext* current_context_ ABSL_GUARDED_BY(mu_) = nullptr;
  int registrations_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration heartbeat_interval_ ABSL_GUARDED_BY(mu_);
  bool accept_ ABSL_GUARDED_BY(mu_) = true;
  bool answer_ ABSL_GUARDED_BY(mu_) = true;
  absl::Duration lease_ ABSL_GUARDED_BY(mu_);
  bool ack_heartbeats_ ABSL_GUARDED_BY(mu_) = true;
};

}  // namespace baton::worker
