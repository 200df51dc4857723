#include "bench/control_plane/testing/fake_worker_service.h"

#include <grpcpp/ext/health_check_service_server_builder_option.h>

#include <chrono>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "common/protocol_version.h"

namespace baton::bench {

class FakeWorkerService::Service final : public baton::v1::WorkerService::Service {
 public:
  explicit Service(FakeWorkerService* owner) : owner_(owner) {}
  grpc::Status Connect(grpc::ServerContext* context, ServerStream* stream) override {
    return owner_->HandleConnect(context, stream);
  }

 private:
  FakeWorkerService* const owner_;
};

FakeWorkerService::FakeWorkerService() : service_(std::make_unique<Service>(this)) {
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(service_.get());
  builder.RegisterCallbackGenericService(&role_);  // Health/Check
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port == 0) std::abort();
  address_ = absl::StrCat("127.0.0.1:", port);
  role_.set_self(address_);
}

FakeWorkerService::~FakeWorkerService() { Shutdown(); }

void FakeWorkerService::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  server_->Shutdown(std::chrono::system_clock::now());  // cancels the calls in progress
  server_->Wait();
}

void FakeWorkerService::set_start(const std::string& job_id, int64_t generation) {
  absl::MutexLock lock(&mu_);
  start_job_ = job_id;
  start_generation_ = generation;
}

int FakeWorkerService::connects() const {
  absl::MutexLock lock(&mu_);
  return connects_;
}

std::vector<baton::v1::Register> FakeWorkerService::registers() const {
  absl::MutexLock lock(&mu_);
  return registers_;
}

grpc::Status FakeWorkerService::HandleConnect(grpc::ServerContext* context, ServerStream* stream) {
  {
    absl::MutexLock lock(&mu_);
    ++connects_;
  }
  if (grpc::Status refusal = role_.Refusal(context); !refusal.ok()) return refusal;
  baton::v1::WorkerMessage first;
  if (!stream->Read(&first) || !first.has_register_()) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "Register must come first");
  }
  baton::v1::CoordinatorMessage registered;
  registered.mutable_registered()->set_protocol_version(kProtocolVersion);
  baton::v1::CoordinatorMessage start;
  {
    absl::MutexLock lock(&mu_);
    registers_.push_back(first.register_());
    if (!start_job_.empty() && first.register_().assignments().empty()) {
      baton::v1::StartAssignment* s = start.mutable_start_assignment();
      s->set_job_id(start_job_);
      s->set_generation(start_generation_);
      baton::v1::RankInfo* rank = s->add_ranks();
      rank->set_rank(started_ranks_++);
      rank->set_local_world_size(1);
      rank->set_worker_id(first.register_().worker_id());
    }
  }
  if (!stream->Write(registered)) return grpc::Status(grpc::StatusCode::CANCELLED, "gone");
  if (start.has_start_assignment() && !stream->Write(start)) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "gone");
  }
  for (baton::v1::WorkerMessage message; stream->Read(&message);) {
  }
  return grpc::Status::OK;
}

}  // namespace baton::bench
