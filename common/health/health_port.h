#pragma once

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/server_builder_option.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace baton {

// A ServerBuilder option that removes the server reflection service, which every
// ServerBuilder gets once the reflection library is linked.
std::unique_ptr<grpc::ServerBuilderOption> WithoutReflection();

// A plaintext gRPC server that answers grpc.health.v1.Health/Check and nothing else, for
// probes that cannot speak TLS (Kubernetes' gRPC probes). Its statuses are set by the
// owner (to mirror a main server's), or computed at each check (SetCheck). Thread-safe.
class HealthPort {
 public:
  // Listens on `address` (port 0: the OS picks). UNAVAILABLE if it cannot.
  static absl::StatusOr<std::unique_ptr<HealthPort>> Start(const std::string& address);
  ~HealthPort();

  int port() const { return port_; }
  // `service` "" is the server's overall status; Set("", false) marks every service.
  void Set(const std::string& service, bool serving);
  // `service`'s status is `serving()` at each check (called on a gRPC thread, without
  // the port's lock; it must be fast and must not block). Replaces a Set() status;
  // Set("", false) overrides it with NOT_SERVING until Set("", true).
  void SetCheck(const std::string& service, std::function<bool()> serving);
  // Check's answer: SERVING (1), NOT_SERVING (2), or nullopt-like -1 for an unknown service.
  int Status(const std::string& service) const;
  void Shutdown();

 private:
  class Service;
  HealthPort() = default;

  mutable absl::Mutex mu_;
  std::map<std::string, bool> serving_ ABSL_GUARDED_BY(mu_) = {{"", true}};
  std::map<std::string, std::function<bool()>> checks_ ABSL_GUARDED_BY(mu_);
  bool all_down_ ABSL_GUARDED_BY(mu_) = false;  // Set("", false)
  std::unique_ptr<Service> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;
};

}  // namespace baton
