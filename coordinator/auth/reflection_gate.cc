#include "coordinator/auth/reflection_gate.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace baton::coordinator {

grpc::Status ReflectionGate::Process(const InputMetadata& auth_metadata, grpc::AuthContext*,
                                     OutputMetadata*, OutputMetadata*) {
  auto path = auth_metadata.find(":path");
  if (path == auth_metadata.end() ||
      !absl::StartsWith(absl::string_view(path->second.data(), path->second.size()),
                        "/grpc.reflection.")) {
    return grpc::Status::OK;
  }
  absl::StatusOr<Principal> caller = auth_->Authenticate(auth_metadata);
  if (!caller.ok()) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        std::string("server reflection needs a valid bearer token: ") +
                            std::string(caller.status().message()));
  }
  return grpc::Status::OK;
}

}  // namespace baton::coordinator
