// grpc_health_probe ADDRESS [SERVICE]: what the kubelet's gRPC probe does (plaintext
// grpc.health.v1.Health/Check, one second per attempt), for tests that check a daemon the
// way Kubernetes will. Prints the serving status; exits 0 for SERVING, 1 for any other
// status, 2 when the call fails (refused, timed out, unknown service), 64 for bad usage.
#include <cstdio>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"

namespace {

// A HealthCheckRequest{service} in the wire format (field 1, a string), so that this tool
// needs no generated code for the health protocol.
std::string EncodeRequest(const std::string& service) {
  std::string out = "\x0a";
  size_t n = service.size();
  do {  // varint length
    unsigned char byte = n & 0x7f;
    n >>= 7;
    out.push_back(static_cast<char>(n ? byte | 0x80 : byte));
  } while (n);
  return out + service;
}

// HealthCheckResponse.status (field 1, a varint enum): 0 UNKNOWN, 1 SERVING, 2 NOT_SERVING,
// 3 SERVICE_UNKNOWN. An empty message is UNKNOWN.
int DecodeStatus(const std::string& bytes) {
  if (bytes.size() >= 2 && bytes[0] == '\x08') return static_cast<unsigned char>(bytes[1]) & 0x7f;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: grpc_health_probe HOST:PORT [SERVICE]\n");
    return 64;
  }
  const std::string service = argc == 3 ? argv[2] : "";
  auto channel = grpc::CreateChannel(argv[1], grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::Slice slice(EncodeRequest(service));
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(1));
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request, &response,
                 [&](grpc::Status s) {
                   status = std::move(s);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) {
    std::fprintf(stderr, "health check of %s '%s' failed: %s\n", argv[1], service.c_str(),
                 status.error_message().c_str());
    return 2;
  }
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices) {
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  static const char* const kNames[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
  const int code = DecodeStatus(bytes);
  std::printf("%s\n", code < 4 ? kNames[code] : "UNKNOWN");
  return code == 1 ? 0 : 1;
}
