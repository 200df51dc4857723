#pragma once

#include <grpcpp/grpcpp.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "baton/v1/worker_service.grpc.pb.h"
#include "common/net/testing/fake_replica.h"

namespace baton::bench {

// A coordinator replica as simulated workers see it: a WorkerService on 127.0.0.1 (port
// chosen by the OS) that, while its role() leads, answers Register with Registered and
// records it, and sends a worker that lists no assignment a StartAssignment of one rank
// (set_start). As a standby it refuses every Connect (UNAVAILABLE, the leader hint);
// grpc.health.v1 answers for the role. Heartbeats and reports are read and dropped.
// Thread-safe.
class FakeWorkerService {
 public:
  FakeWorkerService();   // listening when it returns; aborts if it cannot
  ~FakeWorkerService();  // Shutdown()

  FakeWorkerService(const FakeWorkerService&) = delete;
  FakeWorkerService& operator=(const FakeWorkerService&) = delete;

  // "127.0.0.1:PORT".
  const std::string& address() const { return address_; }
  ReplicaRole& role() { return role_; }

  // From now on, a registering worker that lists no assignment gets a StartAssignment of
  // (job_id, generation), its one rank numbered in the order of registration.
  void set_start(const std::string& job_id, int64_t generation);

  // Connect calls received, refused ones included.
  int connects() const;
  // The Registers received while leading (each answered with Registered), in order.
  std::vector<baton::v1::Register> registers() const;

  // Ends every stream and stops listening: a killed coordinator. Idempotent.
  void Shutdown();

 private:
  class Service;
  using ServerStream =
      grpc::ServerReaderWriter<baton::v1::CoordinatorMessage, baton::v1::WorkerMessage>;

  grpc::Status HandleConnect(grpc::ServerContext* context, ServerStream* stream);

  std::unique_ptr<Service> service_;
  ReplicaRole role_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  std::string address_;

  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  int connects_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<baton::v1::Register> registers_ ABSL_GUARDED_BY(mu_);
  std::string start_job_ ABSL_GUARDED_BY(mu_);  // empty: none
  int64_t start_generation_ ABSL_GUARDED_BY(mu_) = 0;
  int started_ranks_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace baton::bench
