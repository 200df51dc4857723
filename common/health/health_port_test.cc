#include "common/health/health_port.h"

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <chrono>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/health/health_check.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

// Health/Check of `service` (or another `method` with its request) on the port.
HealthAnswer Call(int port, const std::string& service,
                  const std::string& method = kHealthCheckMethod) {
  return CheckHealth(
      grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials()),
      service, std::chrono::system_clock::now() + std::chrono::seconds(30), method);
}

constexpr ServingStatus kServing = ServingStatus::kServing;
constexpr ServingStatus kNotServing = ServingStatus::kNotServing;

TEST(HealthPortTest, AnswersSetStatusesAndUnknownServices) {
  auto port = HealthPort::Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(Call((*port)->port(), "").serving, kServing);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.JobService").status.error_code(),
            grpc::StatusCode::NOT_FOUND);
  (*port)->Set("baton.v1.JobService", false);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.JobService").serving, kNotServing);
  (*port)->Set("baton.v1.JobService", true);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.JobService").serving, kServing);
  (*port)->Set("", false);
  EXPECT_EQ(Call((*port)->port(), "").serving, kNotServing);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.JobService").serving, kNotServing);
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
  EXPECT_EQ(Call((*port)->port(), "baton.v1.WorkerService").serving, kNotServing);
  registered = true;
  EXPECT_EQ(Call((*port)->port(), "baton.v1.WorkerService").serving, kServing);
  EXPECT_EQ(calls.load(), 2);
  // Shutting down (Set("", false)) wins over the check.
  (*port)->Set("", false);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.WorkerService").serving, kNotServing);
  (*port)->Set("", true);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.WorkerService").serving, kServing);
  // Set() replaces a check.
  (*port)->Set("baton.v1.WorkerService", false);
  EXPECT_EQ(Call((*port)->port(), "baton.v1.WorkerService").serving, kNotServing);
}

// Service names of 128 bytes and more have multi-byte lengths in the request.
TEST(HealthPortTest, LongServiceNames) {
  auto port = HealthPort::Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  const std::string name(300, 'x');
  EXPECT_EQ(Call((*port)->port(), name).status.error_code(), grpc::StatusCode::NOT_FOUND);
  (*port)->Set(name, true);
  const HealthAnswer answer = Call((*port)->port(), name);
  EXPECT_TRUE(answer.status.ok()) << answer.status.error_message();
  EXPECT_EQ(answer.serving, kServing);
}

TEST(HealthPortTest, ServesNothingButCheck) {
  auto port = HealthPort::Start("127.0.0.1:0");
  ASSERT_TRUE(port.ok()) << port.status();
  EXPECT_EQ(Call((*port)->port(), "", "/grpc.health.v1.Health/Watch").status.error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(Call((*port)->port(), "", "/baton.v1.JobService/ListJobs").status.error_code(),
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
