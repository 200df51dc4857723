#include "coordinator/ha/standby_server.h"

#include <grpcpp/generic/async_generic_service.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/synchronization/mutex.h"
#include "baton/v1/job_service.grpc.pb.h"
#include "common/health/health_check.h"
#include "common/net/coordinator_addresses.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

class StandbyServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    StandbyServerOptions options;
    options.listen = "127.0.0.1:0";
    options.self = "10.0.0.2:7070";
    options.leader = [this] {
      absl::MutexLock lock(&mu_);
      return leader_;
    };
    auto standby = StandbyServer::Start(options, grpc::InsecureServerCredentials());
    ASSERT_OK(standby);
    standby_ = *std::move(standby);
    channel_ = grpc::CreateChannel(absl::StrCat("127.0.0.1:", standby_->port()),
                                   grpc::InsecureChannelCredentials());
  }

  void SetLeader(const std::string& leader) {
    absl::MutexLock lock(&mu_);
    leader_ = leader;
  }

  absl::Mutex mu_;
  std::string leader_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<StandbyServer> standby_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(StandbyServerTest, RefusesEveryCallNamingTheLeaderInMessageAndMetadata) {
  auto stub = baton::v1::JobService::NewStub(channel_);
  {
    grpc::ClientContext ctx;
    baton::v1::ListJobsResponse resp;
    const grpc::Status s = stub->ListJobs(&ctx, baton::v1::ListJobsRequest(), &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(s.error_message(), HasSubstr("10.0.0.2:7070 is a standby; no leader is elected"));
    EXPECT_EQ(LeaderHint(ctx), std::nullopt);
  }
  SetLeader("10.0.0.1:7070");
  {
    // A stream is refused the same way.
    grpc::ClientContext ctx;
    baton::v1::WatchJobRequest req;
    auto reader = stub->WatchJob(&ctx, req);
    baton::v1::JobUpdate update;
    EXPECT_FALSE(reader->Read(&update));
    const grpc::Status s = reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
    EXPECT_THAT(s.error_message(), HasSubstr("is a standby; the leader is 10.0.0.1:7070"));
    EXPECT_EQ(LeaderHint(ctx), "10.0.0.1:7070");
  }
}

TEST_F(StandbyServerTest, HealthSaysNotServingForTheLeadersServicesButAliveOverall) {
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(10);
  EXPECT_EQ(CheckHealth(channel_, kJobServiceName, deadline).serving, ServingStatus::kNotServing);
  EXPECT_EQ(CheckHealth(channel_, kWorkerServiceName, deadline).serving,
            ServingStatus::kNotServing);
  EXPECT_EQ(CheckHealth(channel_, "", deadline).serving, ServingStatus::kServing);
}

TEST_F(StandbyServerTest, ShutdownFreesThePortForTheLeader) {
  const int port = standby_->port();
  standby_->Shutdown();
  grpc::ServerBuilder builder;
  grpc::CallbackGenericService any;  // a server needs a service
  builder.RegisterCallbackGenericService(&any);
  int bound = 0;
  builder.AddListeningPort(absl::StrCat("127.0.0.1:", port), grpc::InsecureServerCredentials(),
                           &bound);
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  EXPECT_EQ(bound, port);
  server->Shutdown();
}

}  // namespace
}  // namespace baton::coordinator
