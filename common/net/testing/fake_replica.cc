#include "common/net/testing/fake_replica.h"

#include <grpcpp/ext/health_check_service_server_builder_option.h>

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/health/health_check.h"
#include "common/net/coordinator_addresses.h"

namespace baton {

// One call: Check reads its request and answers (or, hanging, waits for its cancellation);
// any other method is finished at once.
class ReplicaRole::Call final : public grpc::ServerGenericBidiReactor {
 public:
  Call(ReplicaRole* role, grpc::GenericCallbackServerContext* ctx) : role_(role) {
    if (ctx->method() == kHealthCheckMethod) {
      StartRead(&request_);
      return;
    }
    const grpc::Status refusal = role_->Refusal(ctx);
    Finish(!refusal.ok() ? refusal
                         : grpc::Status(grpc::StatusCode::UNIMPLEMENTED,
                                        absl::StrCat("the fake leader serves no ", ctx->method())));
  }

  void OnReadDone(bool ok) override {
    const std::optional<std::string> service =
        ok ? DecodeHealthCheckRequest(ByteBufferBytes(request_)) : std::nullopt;
    if (!service) {
      Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad HealthCheckRequest"));
      return;
    }
    bool leader, hang;
    {
      absl::MutexLock lock(&role_->mu_);
      leader = role_->leader_ || role_->checks_report_leader_;
      hang = role_->hang_checks_;
    }
    if (hang) {
      absl::MutexLock lock(&mu_);
      hanging_ = true;
      if (!cancelled_) return;  // OnCancel finishes it.
      Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
      return;
    }
    ServingStatus status = ServingStatus::kServing;
    if (*service == kJobServiceName || *service == kWorkerServiceName) {
      status = leader ? ServingStatus::kServing : ServingStatus::kNotServing;
    } else if (!service->empty()) {
      Finish(grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("unknown service ", *service)));
      return;
    }
    response_bytes_ = EncodeHealthCheckResponse(status);
    grpc::Slice slice(response_bytes_);
    response_ = grpc::ByteBuffer(&slice, 1);
    StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
  }

  void OnCancel() override {
    absl::MutexLock lock(&mu_);
    cancelled_ = true;
    if (hanging_) Finish(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
  }
  void OnDone() override { delete this; }

 private:
  ReplicaRole* const role_;
  grpc::ByteBuffer request_;
  std::string response_bytes_;
  grpc::ByteBuffer response_;
  absl::Mutex mu_;
  // A hanging Check is finished by whichever of OnReadDone and OnCancel comes second.
  bool hanging_ ABSL_GUARDED_BY(mu_) = false;
  bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
};

void ReplicaRole::set_self(const std::string& address) {
  absl::MutexLock lock(&mu_);
  self_ = address;
}

void ReplicaRole::BecomeLeader() {
  absl::MutexLock lock(&mu_);
  leader_ = true;
  known_leader_.reset();
}

void ReplicaRole::BecomeStandby(std::optional<std::string> leader) {
  absl::MutexLock lock(&mu_);
  leader_ = false;
  known_leader_ = std::move(leader);
}

void ReplicaRole::set_hang_checks(bool hang) {
  absl::MutexLock lock(&mu_);
  hang_checks_ = hang;
}

void ReplicaRole::set_checks_report_leader(bool lagging) {
  absl::MutexLock lock(&mu_);
  checks_report_leader_ = lagging;
}

bool ReplicaRole::is_leader() const {
  absl::MutexLock lock(&mu_);
  return leader_;
}

grpc::Status ReplicaRole::Refusal(grpc::ServerContextBase* context) const {
  absl::MutexLock lock(&mu_);
  if (leader_) return grpc::Status::OK;
  if (!known_leader_) {
    return grpc::Status(
        grpc::StatusCode::UNAVAILABLE,
        absl::StrCat("baton-coordinator ", self_, " is a standby; no leader is elected yet"));
  }
  context->AddTrailingMetadata(kLeaderMetadataKey, *known_leader_);
  return grpc::Status(
      grpc::StatusCode::UNAVAILABLE,
      absl::StrCat("baton-coordinator ", self_, " is a standby; the leader is ", *known_leader_));
}

int ReplicaRole::calls(const std::string& method) const {
  absl::MutexLock lock(&mu_);
  auto it = calls_.find(method);
  return it == calls_.end() ? 0 : it->second;
}

grpc::ServerGenericBidiReactor* ReplicaRole::CreateReactor(
    grpc::GenericCallbackServerContext* ctx) {
  {
    absl::MutexLock lock(&mu_);
    ++calls_[ctx->method()];
  }
  return new Call(this, ctx);
}

FakeReplica::FakeReplica(int port) {
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                           &port_);
  builder.RegisterCallbackGenericService(&role_);
  // The role answers Check, not gRPC's default health service.
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) std::abort();
  address_ = absl::StrCat("127.0.0.1:", port_);
  role_.set_self(address_);
}

FakeReplica::~FakeReplica() { Shutdown(); }

void FakeReplica::Shutdown() {
  if (server_ == nullptr) return;
  server_->Shutdown(std::chrono::system_clock::now());  // Cancels calls in progress.
  server_->Wait();
  server_.reset();
}

}  // namespace baton
