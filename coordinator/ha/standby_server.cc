#include "coordinator/ha/standby_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/health_check_service_interface.h>

#include <utility>

#include "absl/memory/memory.h"
#include "absl/strings/str_cat.h"
#include "common/net/coordinator_addresses.h"

namespace baton::coordinator {
namespace {

constexpr const char* kLeaderServices[] = {kJobServiceName, kWorkerServiceName};

// Finishes its call at once with the refusal.
class Refusal final : public grpc::ServerGenericBidiReactor {
 public:
  Refusal(grpc::GenericCallbackServerContext* ctx, const std::string& self,
          const std::string& leader) {
    if (!leader.empty()) ctx->AddTrailingMetadata(kLeaderMetadataKey, leader);
    Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                        absl::StrCat("baton-coordinator ", self, " is a standby; ",
                                     leader.empty() ? "no leader is elected yet, retry shortly"
                                                    : absl::StrCat("the leader is ", leader))));
  }
  void OnDone() override { delete this; }
};

}  // namespace

class StandbyServer::Redirect final : public grpc::CallbackGenericService {
 public:
  explicit Redirect(const StandbyServer* standby) : standby_(standby) {}
  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    std::string self;
    {
      absl::MutexLock lock(&standby_->mu_);
      self = standby_->self_;
    }
    return new Refusal(ctx, self, standby_->options_.leader());
  }

 private:
  const StandbyServer* const standby_;
};

StandbyServer::StandbyServer(StandbyServerOptions options)
    : options_(std::move(options)), self_(options_.self) {}

void StandbyServer::set_self(const std::string& self) {
  absl::MutexLock lock(&mu_);
  self_ = self;
}

StandbyServer::~StandbyServer() { Shutdown(); }

absl::StatusOr<std::unique_ptr<StandbyServer>> StandbyServer::Start(
    StandbyServerOptions options, std::shared_ptr<grpc::ServerCredentials> credentials) {
  auto standby = absl::WrapUnique(new StandbyServer(std::move(options)));
  standby->redirect_ = std::make_unique<Redirect>(standby.get());
  grpc::EnableDefaultHealthCheckService(true);
  grpc::ServerBuilder builder;
  builder.SetOption(WithoutReflection());
  builder.AddListeningPort(standby->options_.listen, std::move(credentials), &standby->port_);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterCallbackGenericService(standby->redirect_.get());
  standby->server_ = builder.BuildAndStart();
  if (standby->server_ == nullptr || standby->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", standby->options_.listen));
  }
  for (const char* service : kLeaderServices) {
    standby->server_->GetHealthCheckService()->SetServingStatus(service, false);
  }
  if (!standby->options_.health_listen.empty()) {
    absl::StatusOr<std::unique_ptr<HealthPort>> port =
        HealthPort::Start(standby->options_.health_listen);
    if (!port.ok()) {
      return absl::Status(port.status().code(),
                          absl::StrCat(port.status().message(), " (--health_listen)"));
    }
    standby->health_port_ = *std::move(port);
    for (const char* service : kLeaderServices) standby->health_port_->Set(service, false);
  }
  return standby;
}

void StandbyServer::Shutdown() {
  health_port_.reset();
  if (server_ == nullptr) return;
  server_->GetHealthCheckService()->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now());
  server_->Wait();
  server_.reset();
}

}  // namespace baton::coordinator
