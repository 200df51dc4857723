#include "common/health/health_port.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

struct Answer {
  grpc::StatusCode code;
  std::string bytes;  // the serialized HealthCheckResponse
};

// Calls `method` with a HealthCheckRequest{service} in its wire form.
Answer Call(int port, const std::string& service,
            const std::string& method = "/grpc.health.v1.Health/Check") {
  auto channel =
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
  grpc::GenericStub stub(channel);
  grpc::Slice slice(std::string("\x0a", 1) + static_cast<char>(service.size()) + service);
  grpc::ByteBuffer request(&slice, 1), response;
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  std::vector<grpc::Slice> slices;
  std::string bytes;
  if (status.ok() && response.Dump(&slices).ok()) {
    for (const grpc::Slice& s : slices)
      bytes.append(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return {status.error_code(), bytes};
}

const std::string kServing("\x08\x01", 2);
const std::string kNotServing("\x08\x02", 2);

TEST(HealthPortTest, AnswersSetStatusesAndUnknownServices) {
  auto port = HealthPort::Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(Call((*port)->port(), "").bytes, kServing);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.JobService").code, grpc::StatusCode::NOT_FOUND);
  (*port)->Set("baton.v1.JobService", false);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.JobService").bytes, kNotServing);
  (*port)->Set("baton.v1.JobService", true);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.JobService").bytes, kServing);
  (*port)->Set("", false);
  EXPECT_EQ(Call((*port)->port(), "").bytes, kNotServing);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.JobService").bytes, kNotServing);
}

TEST(HealthPortTest, CheckedServicesAreEvaluatedAtEachCall) {
  auto port = HealthPort::Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  std::atomic<bool> registered{false};
  std::atomic<int> calls{0};
  (*port)->SetCheck("baton.v1.WorkerService", [&] {
    ++calls;
    return registered.load();
  });
  EXPECT_EQ(Call((*port)->port(), "baton.v1.WorkerService").bytes, kNotServing);
  registered = true;
  EXPECT_EQ(Call((*port)->port(), "baton.v1.WorkerService").bytes, kServing);
  EXPECT_EQ(calls.load(), 2);
  // Shutting down (Set("", false)) wins over the check.
  (*port)->Set("", false);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.WorkerService").bytes, kNotServing);
  (*port)->Set("", true);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.WorkerService").bytes, kServing);
  // Set() replaces a check.
  (*port)->Set("baton.v1.WorkerService", false);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.WorkerService").bytes, kNotServing);
}

TEST(HealthPortTest, ServesNothingButCheck) {
  auto port = HealthPort::Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(Call((*port)->port(), "", "/grpc.health.v1.Health/Watch").code,
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Call((*port)->port(), "", "/baton.v1.JobService/ListJobs").code,
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST(HealthPortTest, AnAddressInUseIsUnavailable) {
  auto first = HealthPort::Start("127.0.0.1:0");
  ASSERT_TRUE(first.ok()) << first.status();
  auto second = HealthPort::Start(absl::StrCat("127.0.0.1:", (*first)->port()));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace baton
