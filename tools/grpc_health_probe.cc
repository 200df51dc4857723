// grpc_health_probe ADDRESS [SERVICE]: what the kubelet's gRPC probe does (plaintext
// grpc.health.v1.Health/Check, one second per attempt), for tests that check a daemon the
// way Kubernetes will. Prints the serving status; exits 0 for SERVING, 1 for any other
// status, 2 when the call fails (refused, timed out, unknown service), 64 for bad usage.
#include <chrono>
#include <cstdio>
#include <string>

#include "common/health/health_check.h"
#include "grpcpp/grpcpp.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: grpc_health_probe HOST:PORT [SERVICE]\n");
    return 64;
  }
  const std::string service = argc == 3 ? argv[2] : "";
  const baton::HealthAnswer answer =
      baton::CheckHealth(grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials()), service,
                         std::chrono::system_clock::now() + std::chrono::seconds(1));
  if (!answer.status.ok()) {
    std::fprintf(stderr, "health check of %s '%s' failed: %s\n", argv[1], service.c_str(),
                 answer.status.error_message().c_str());
    return 2;
  }
  std::printf("%s\n", baton::ServingStatusName(answer.serving));
  return answer.serving == baton::ServingStatus::kServing ? 0 : 1;
}
