#include "common/health/health_check.h"

#include <grpcpp/generic/generic_stub.h>

#include <vector>

#include "absl/synchronization/notification.h"

namespace baton {
namespace {

constexpr unsigned char kServiceTag = 0x0a;  // field 1, length-delimited
constexpr unsigned char kStatusTag = 0x08;   // field 1, varint

void AppendVarint(uint64_t n, std::string* out) {
  do {
    const unsigned char byte = n & 0x7f;
    n >>= 7;
    out->push_back(static_cast<char>(n ? byte | 0x80 : byte));
  } while (n);
}

// The varint at bytes[*i] (advancing *i); nullopt if truncated or over 64 bits.
std::optional<uint64_t> ReadVarint(absl::string_view bytes, size_t* i) {
  uint64_t n = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*i >= bytes.size()) return std::nullopt;
    const unsigned char b = static_cast<unsigned char>(bytes[(*i)++]);
    n |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return n;
  }
  return std::nullopt;
}

}  // namespace

std::string ByteBufferBytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

const char* ServingStatusName(ServingStatus status) {
  switch (status) {
    case ServingStatus::kServing:
      return "SERVING";
    case ServingStatus::kNotServing:
      return "NOT_SERVING";
    case ServingStatus::kServiceUnknown:
      return "SERVICE_UNKNOWN";
    case ServingStatus::kUnknown:
      break;
  }
  return "UNKNOWN";
}

std::string EncodeHealthCheckRequest(absl::string_view service) {
  std::string out(1, static_cast<char>(kServiceTag));
  AppendVarint(service.size(), &out);
  out.append(service.data(), service.size());
  return out;
}

std::optional<std::string> DecodeHealthCheckRequest(absl::string_view bytes) {
  std::string service;
  size_t i = 0;
  while (i < bytes.size()) {
    if (static_cast<unsigned char>(bytes[i++]) != kServiceTag) return std::nullopt;
    const std::optional<uint64_t> len = ReadVarint(bytes, &i);
    if (!len || *len > bytes.size() - i) return std::nullopt;
    service = std::string(bytes.substr(i, *len));
    i += *len;
  }
  return service;
}

std::string EncodeHealthCheckResponse(ServingStatus status) {
  std::string out(1, static_cast<char>(kStatusTag));
  AppendVarint(static_cast<uint64_t>(status), &out);
  return out;
}

ServingStatus DecodeHealthCheckResponse(absl::string_view bytes) {
  size_t i = 0;
  if (bytes.empty() || static_cast<unsigned char>(bytes[i++]) != kStatusTag) {
    return ServingStatus::kUnknown;
  }
  const std::optional<uint64_t> value = ReadVarint(bytes, &i);
  if (!value || *value > static_cast<uint64_t>(ServingStatus::kServiceUnknown)) {
    return ServingStatus::kUnknown;
  }
  return static_cast<ServingStatus>(*value);
}

HealthAnswer CheckHealth(const std::shared_ptr<grpc::Channel>& channel, absl::string_view service,
                         std::chrono::system_clock::time_point deadline,
                         const std::string& method) {
  grpc::GenericStub stub(channel);
  grpc::Slice slice(EncodeHealthCheckRequest(service));
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  context.set_deadline(deadline);
  HealthAnswer answer;
  absl::Notification done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    answer.status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  if (answer.status.ok()) answer.serving = DecodeHealthCheckResponse(ByteBufferBytes(response));
  return answer;
}

}  // namespace baton
