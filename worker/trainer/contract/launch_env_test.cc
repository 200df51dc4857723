#include "worker/trainer/contract/launch_env.h"

#include <map>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/contract/contract.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<LaunchEnv> Parse(const std::map<std::string, std::string>& vars) {
  return ParseLaunchEnv([&vars](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(LaunchEnvTest, UnsetWorldSizeMeansSingleProcess) {
  absl::StatusOr<LaunchEnv> env = Parse({});
  ASSERT_OK(env);
  EXPECT_EQ(env->rank, 0);
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->metrics_fd, -1);
  EXPECT_TRUE(env->master_addr.empty());
}

TEST(LaunchEnvTest, ParsesTorchrunAndBatonVariables) {
  absl::StatusOr<LaunchEnv> env = Parse({{"RANK", "3"},
                                         {"WORLD_SIZE", "4"},
                                         {"LOCAL_RANK", "1"},
                                         {"LOCAL_WORLD_SIZE", "2"},
                                         {"GROUP_RANK", "1"},
                                         {"MASTER_ADDR", "10.0.0.5"},
                                         {"MASTER_PORT", "29500"},
                                         {"BATON_JOB_ID", "j-000007"},
                                         {"BATON_GENERATION", "2"},
                                         {"BATON_METRICS_FD", "3"}});
  ASSERT_OK(env);
  EXPECT_EQ(env->rank, 3);
  EXPECT_EQ(env->world_size, 4);
  EXPECT_EQ(env->local_rank, 1);
  EXPECT_EQ(env->local_world_size, 2);
  EXPECT_EQ(env->group_rank, 1);
  EXPECT_EQ(env->master_addr, "10.0.0.5");
  EXPECT_EQ(env->master_port, 29500);
  EXPECT_EQ(env->job_id, "j-000007");
  EXPECT_EQ(env->generation, 2);
  EXPECT_EQ(env->metrics_fd, 3);
}

TEST(LaunchEnvTest, WorldOfOneNeedsNoMaster) {
  absl::StatusOr<LaunchEnv> env = Parse({{"RANK", "0"}, {"WORLD_SIZE", "1"}});
  ASSERT_OK(env);
  EXPECT_EQ(env->world_size, 1);
  EXPECT_EQ(env->generation, 0) << "no BATON_GENERATION: unknown";
}

TEST(LaunchEnvTest, RejectsInconsistentValuesNamingTheVariable) {
  const std::map<std::string, std::string> base = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "1234"}};
  ASSERT_OK(Parse(base));
  auto with = [&base](const std::string& k, const std::string& v) {
    auto vars = base;
    vars[k] = v;
    return vars;
  };
  auto without = [&base](const std::string& k) {
    auto vars = base;
    vars.erase(k);
    return vars;
  };
  EXPECT_THAT(Parse(with("RANK", "2")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RANK=2")));
  EXPECT_THAT(Parse(with("WORLD_SIZE", "two")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("WORLD_SIZE='two'")));
  EXPECT_THAT(Parse(without("RANK")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RANK is required")));
  EXPECT_THAT(Parse(without("MASTER_ADDR")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MASTER_ADDR")));
  EXPECT_THAT(Parse(with("MASTER_PORT", "70000")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("MASTER_PORT=70000")));
  EXPECT_THAT(Parse(with("BATON_GENERATION", "3x")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("BATON_GENERATION='3x'")));
  EXPECT_THAT(Parse(with("BATON_GENERATION", "-1")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("BATON_GENERATION=-1")));
  EXPECT_THAT(Parse(with("BATON_METRICS_FD", "-3")),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("BATON_METRICS_FD")));
  EXPECT_THAT(Parse({{"RANK", "1"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("RANK=1")));
}

TEST(ContractTest, ExitCodesByStatus) {
  EXPECT_EQ(ExitCodeForStatus(absl::OkStatus()), kExitOk);
  EXPECT_EQ(ExitCodeForStatus(absl::InvalidArgumentError("")), kExitUsage);
  EXPECT_EQ(ExitCodeForStatus(absl::NotFoundError("")), kExitData);
  EXPECT_EQ(ExitCodeForStatus(absl::DataLossError("")), kExitData);
  EXPECT_EQ(ExitCodeForStatus(absl::FailedPreconditionError("")), kExitData);  // Superseded.
  EXPECT_EQ(ExitCodeForStatus(absl::UnavailableError("")), kExitPeer);
  EXPECT_EQ(ExitCodeForStatus(absl::CancelledError("")), kExitTerminated);
  EXPECT_EQ(ExitCodeForStatus(absl::InternalError("")), kExitInternal);
}

}  // namespace
}  // namespace baton::trainer
