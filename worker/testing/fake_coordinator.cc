#include "worker/testing/fake_coordinator.h"

#include <grpcpp/ext/health_check_service_server_builder_option.h>

#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/protocol_version.h"
#include "common/time/proto_time.h"

namespace baton::worker {

class FakeCoordinator::Service final : public baton::v1::WorkerService::Service {
 public:
  explicit Service(FakeCoordinator* owner) : owner_(owner) {}
  grpc::Status Connect(grpc::ServerContext* context, ServerStream* stream) override {
    return owner_->HandleConnect(context, stream);
  }

 private:
  FakeCoordinator* const owner_;
};

FakeCoordinator::FakeCoordinator(int requested_port) : service_(std::make_unique<Service>(this)) {
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", requested_port),
                           grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service_.get());
  builder.RegisterCallbackGenericService(&role_);  // Health/Check.
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) std::abort();
  address_ = absl::StrCat("127.0.0.1:", port);
  role_.set_self(address_);
}

FakeCoordinator::~FakeCoordinator() {
  BreakStream();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  server_->Wait();
}

void FakeCoordinator::set_heartbeat_interval(absl::Duration interval) {
  absl::MutexLock lock(&mu_);
  heartbeat_interval_ = interval;
}

void FakeCoordinator::set_accept_registrations(bool accept) {
  absl::MutexLock lock(&mu_);
  accept_ = accept;
}

void FakeCoordinator::set_answer_registrations(bool answer) {
  absl::MutexLock lock(&mu_);
  answer_ = answer;
}

void FakeCoordinator::set_lease(absl::Duration lease) {
  absl::MutexLock lock(&mu_);
  lease_ = lease;
}

void FakeCoordinator::set_ack_heartbeats(bool ack) {
  absl::MutexLock lock(&mu_);
  ack_heartbeats_ = ack;
}

void FakeCoordinator::Record(baton::v1::WorkerMessage message) {
  absl::MutexLock lock(&mu_);
  messages_.push_back(std::move(message));
  recorded_.SignalAll();
}

grpc::Status FakeCoordinator::HandleConnect(grpc::ServerContext* context, ServerStream* stream) {
  if (grpc::Status refusal = role_.Refusal(context); !refusal.ok()) return refusal;
  baton::v1::WorkerMessage first;
  if (!stream->Read(&first)) return grpc::Status(grpc::StatusCode::CANCELLED, "no Register");
  const bool is_register = first.has_register_();
  // The answer is decided before the test can see the Register, so a setting it changes
  // once it saw it applies to the next Register.
  bool answer, accept;
  baton::v1::CoordinatorMessage reply;
  {
    absl::MutexLock lock(&mu_);
    answer = answer_;
    accept = accept_;
    reply.mutable_registered()->set_protocol_version(kProtocolVersion);
    if (heartbeat_interval_ > absl::ZeroDuration()) {
      *reply.mutable_registered()->mutable_heartbeat_interval() = ToProto(heartbeat_interval_);
    }
    if (lease_ > absl::ZeroDuration()) {
      *reply.mutable_registered()->mutable_lease() = ToProto(lease_);
    }
  }
  Record(first);
  if (!is_register) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "Register must come first");
  }
  if (!answer) {
    baton::v1::WorkerMessage message;
    while (stream->Read(&message)) Record(message);
    return grpc::Status(grpc::StatusCode::CANCELLED, "Register left unanswered");
  }
  if (!accept) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not accepting");
  if (!stream->Write(reply)) return grpc::Status(grpc::StatusCode::CANCELLED, "write failed");
  {
    absl::MutexLock lock(&mu_);
    current_ = stream;
    current_context_ = context;
    ++registrations_;
  }
  baton::v1::WorkerMessage message;
  while (stream->Read(&message)) {
    if (message.has_heartbeat()) {
      absl::MutexLock lock(&mu_);  // Writes are serialised under mu_ (see Send).
      if (ack_heartbeats_) {
        baton::v1::CoordinatorMessage ack;
        ack.mutable_heartbeat_ack()->set_seq(message.heartbeat().seq());
        stream->Write(ack);
      }
    }
    Record(message);
  }
  absl::MutexLock lock(&mu_);
  if (current_ == stream) {
    current_ = nullptr;
    current_context_ = nullptr;
  }
  return grpc::Status::OK;
}

std::optional<baton::v1::WorkerMessage> FakeCoordinator::Next(const Predicate& pred,
                                                              absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  absl::MutexLock lock(&mu_);
  for (bool timed_out = false;; timed_out = recorded_.WaitWithDeadline(&mu_, deadline)) {
    for (auto it = messages_.begin(); it != messages_.end(); ++it) {
      if (!pred(*it)) continue;
      baton::v1::WorkerMessage found = std::move(*it);
      messages_.erase(it);
      return found;
    }
    if (timed_out) return std::nullopt;
  }
}

std::optional<baton::v1::WorkerMessage> FakeCoordinator::Next(
    baton::v1::WorkerMessage::MsgCase kind, absl::Duration timeout) {
  return Next([kind](const baton::v1::WorkerMessage& m) { return m.msg_case() == kind; }, timeout);
}

bool FakeCoordinator::Send(const baton::v1::CoordinatorMessage& message) {
  absl::MutexLock lock(&mu_);  // Held across Write: HandleConnect clears current_ under it.
  return current_ != nullptr && current_->Write(message);
}

void FakeCoordinator::BreakStream() {
  absl::MutexLock lock(&mu_);
  if (current_context_ != nullptr) current_context_->TryCancel();
}

int FakeCoordinator::registrations() const {
  absl::MutexLock lock(&mu_);
  return registrations_;
}

}  // namespace baton::worker
