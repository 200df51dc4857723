#pragma once

#include <grpcpp/grpcpp.h>
#include <grpcpp/security/auth_metadata_processor.h>

#include "coordinator/auth/authenticator.h"

namespace baton::coordinator {

// Lets only authenticated callers use server reflection (it describes the whole API),
// while every other call passes through untouched: health stays open, JobService and
// ClusterService authenticate in their handlers, workers by certificate. Installed on the
// TLS server credentials (gRPC runs metadata processors only on secure transports).
// `auth` must outlive the server.
class ReflectionGate final : public grpc::AuthMetadataProcessor {
 public:
  explicit ReflectionGate(const Authenticator* auth) : auth_(auth) {}

  bool IsBlocking() const override { return false; }  // a hash and a map lookup
  grpc::Status Process(const InputMetadata& auth_metadata, grpc::AuthContext* context,
                       OutputMetadata* consumed_auth_metadata,
                       OutputMetadata* response_metadata) override;

 private:
  const Authenticator* const auth_;
};

}  // namespace baton::coordinator
