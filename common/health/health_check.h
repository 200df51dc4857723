#pragma once

// grpc.health.v1.Health/Check without generated code for the health protocol: its two
// messages in their wire form, and a client call. Shared by the health port (the server
// side), tools/grpc_health_probe (what the kubelet's probe does) and the tests.
//
//   HealthCheckRequest  { string service = 1; }
//   HealthCheckResponse { ServingStatus status = 1; }  // 0 UNKNOWN, 1 SERVING,
//                                                      // 2 NOT_SERVING, 3 SERVICE_UNKNOWN

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"

namespace baton {

inline constexpr char kHealthCheckMethod[] = "/grpc.health.v1.Health/Check";

enum class ServingStatus : int {
  kUnknown = 0,
  kServing = 1,
  kNotServing = 2,
  kServiceUnknown = 3,
};

// "UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN".
const char* ServingStatusName(ServingStatus status);

std::string EncodeHealthCheckRequest(absl::string_view service);
// The request's service; nullopt if the bytes are not a HealthCheckRequest (only field 1,
// length-delimited, may appear; the last one wins, as in protobuf).
std::optional<std::string> DecodeHealthCheckRequest(absl::string_view bytes);

std::string EncodeHealthCheckResponse(ServingStatus status);
// The response's status; kUnknown for an empty message or one this does not understand.
ServingStatus DecodeHealthCheckResponse(absl::string_view bytes);

// The bytes of a (generic call's) message.
std::string ByteBufferBytes(const grpc::ByteBuffer& buffer);

// One Health/Check call (or another unary `method` with the same request, for tests).
struct HealthAnswer {
  grpc::Status status;
  ServingStatus serving = ServingStatus::kUnknown;  // meaningful when status is OK
};
HealthAnswer CheckHealth(const std::shared_ptr<grpc::Channel>& channel, absl::string_view service,
                         std::chrono::system_clock::time_point deadline,
                         const std::string& method = kHealthCheckMethod);

}  // namespace baton
