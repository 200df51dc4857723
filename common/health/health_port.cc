#include "common/health/health_port.h"

#include <grpcpp/ext/health_check_service_server_builder_option.h>
#include <grpcpp/impl/server_builder_plugin.h>

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/health/health_check.h"

namespace baton {
namespace {

class RemoveReflection final : public grpc::ServerBuilderOption {
 public:
  void UpdateArguments(grpc::ChannelArguments*) override {}
  void UpdatePlugins(std::vector<std::unique_ptr<grpc::ServerBuilderPlugin>>* plugins) override {
    plugins->erase(std::remove_if(plugins->begin(), plugins->end(),
                                  [](const std::unique_ptr<grpc::ServerBuilderPlugin>& p) {
                                    return p->name() == "proto_server_reflection";
                                  }),
                   plugins->end());
  }
};

}  // namespace

std::unique_ptr<grpc::ServerBuilderOption> WithoutReflection() {
  return std::make_unique<RemoveReflection>();
}

class HealthPort::Service final : public grpc::CallbackGenericService {
 public:
  explicit Service(const HealthPort* port) : port_(port) {}

  grpc::ServerGenericBidiReactor* CreateReactor(grpc::GenericCallbackServerContext* ctx) override {
    return new Call(port_, ctx->method() == kHealthCheckMethod);
  }

 private:
  // One call: Check reads one request and answers; any other method is UNIMPLEMENTED.
  class Call final : public grpc::ServerGenericBidiReactor {
   public:
    Call(const HealthPort* port, bool check) : port_(port) {
      if (check) {
        StartRead(&request_);
      } else {
        Finish(grpc::Status(grpc::StatusCode::UNIMPLEMENTED, "this port serves health only"));
      }
    }
    void OnReadDone(bool ok) override {
      const std::optional<std::string> service =
          ok ? DecodeHealthCheckRequest(ByteBufferBytes(request_)) : std::nullopt;
      if (!service) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad HealthCheckRequest"));
        return;
      }
      const int status = port_->Status(*service);
      if (status < 0) {
        Finish(
            grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("unknown service ", *service)));
        return;
      }
      response_bytes_ = EncodeHealthCheckResponse(static_cast<ServingStatus>(status));
      grpc::Slice slice(response_bytes_);
      response_ = grpc::ByteBuffer(&slice, 1);
      StartWriteAndFinish(&response_, grpc::WriteOptions(), grpc::Status::OK);
    }
    void OnDone() override { delete this; }

   private:
    const HealthPort* const port_;
    grpc::ByteBuffer request_;
    std::string response_bytes_;
    grpc::ByteBuffer response_;
  };

  const HealthPort* const port_;
};

absl::StatusOr<std::unique_ptr<HealthPort>> HealthPort::Start(const std::string& address) {
  std::unique_ptr<HealthPort> port(new HealthPort());
  port->service_ = std::make_unique<Service>(port.get());
  grpc::ServerBuilder builder;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port->port_);
  // No SO_REUSEPORT (gRPC's default): a port in use is an error, not shared with whoever
  // holds it.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.RegisterCallbackGenericService(port->service_.get());
  // Nothing but Check: not gRPC's default health service (which the main server enables
  // process-wide), not reflection.
  builder.SetOption(std::make_unique<grpc::HealthCheckServiceServerBuilderOption>(nullptr));
  builder.SetOption(WithoutReflection());
  port->server_ = builder.BuildAndStart();
  if (port->server_ == nullptr || port->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  return port;
}

HealthPort::~HealthPort() { Shutdown(); }

void HealthPort::Shutdown() {
  if (server_ == nullptr) return;
  server_->Shutdown();
  server_->Wait();
  server_.reset();
}

void HealthPort::Set(const std::string& service, bool serving) {
  absl::MutexLock lock(&mu_);
  if (service.empty()) {
    for (auto& [name, value] : serving_) value = serving;
    all_down_ = !serving;
  } else {
    serving_[service] = serving;
    checks_.erase(service);
  }
}

void HealthPort::SetCheck(const std::string& service, std::function<bool()> serving) {
  absl::MutexLock lock(&mu_);
  serving_.erase(service);
  checks_[service] = std::move(serving);
}

int HealthPort::Status(const std::string& service) const {
  std::function<bool()> check;
  {
    absl::MutexLock lock(&mu_);
    auto it = serving_.find(service);
    if (it != serving_.end()) return it->second ? 1 : 2;
    auto c = checks_.find(service);
    if (c == checks_.end()) return -1;
    if (all_down_) return 2;
    check = c->second;
  }
  return check() ? 1 : 2;
}

}  // namespace baton
