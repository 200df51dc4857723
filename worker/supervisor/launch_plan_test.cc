#include "worker/supervisor/launch_plan.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const LaunchPlanOptions kOptions{"/w", "/opt/baton-trainer", {"PATH=/usr/bin:/bin"}};

baton::v1::StartAssignment Assignment() {
  baton::v1::StartAssignment a;
  a.set_job_id("j-7");
  a.set_generation(3);
  a.set_world_size(2);
  a.set_master_addr("10.0.0.1");
  a.set_master_port(29500);
  return a;
}

baton::v1::RankInfo Rank(int r) {
  baton::v1::RankInfo rank;
  rank.set_rank(r);
  rank.set_local_rank(r);
  rank.set_local_world_size(2);
  return rank;
}

bool HasEnv(const RankLaunchPlan& plan, const std::string& entry) {
  return std::find(plan.request.env.begin(), plan.request.env.end(), entry) !=
         plan.request.env.end();
}

TEST(LaunchPlanTest, ATrainerRankRunsTheTrainerInItsDirectoryWithItsProfileDirectory) {
  baton::v1::StartAssignment a = Assignment();
  a.mutable_spec()->mutable_trainer();
  const absl::StatusOr<RankLaunchPlan> plan = PlanRankLaunch(a, Rank(1), {"3"}, kOptions);
  ASSERT_OK(plan);
  EXPECT_EQ(plan->rank_dir, "/w/jobs/j-7/gen-3/rank-1");
  EXPECT_EQ(plan->request.working_dir, plan->rank_dir);
  EXPECT_TRUE(plan->request.builtin_trainer);
  EXPECT_EQ(plan->request.argv.front(), "/opt/baton-trainer");
  EXPECT_THAT(plan->request.argv, Contains("--profile_dir=/w/jobs/j-7/gen-3/rank-1/profile"));
  EXPECT_THAT(plan->required_dirs,
              ElementsAre("/w/jobs/j-7/gen-3/rank-1", "/w/jobs/j-7/gen-3/rank-1/profile"));
  // No checkpoint_dir in the spec: the job's default one, made if possible.
  EXPECT_THAT(plan->best_effort_dirs, ElementsAre("/w/jobs/j-7/ckpt"));
  EXPECT_TRUE(HasEnv(*plan, "RANK=1"));
  EXPECT_TRUE(HasEnv(*plan, "WORLD_SIZE=2"));
  EXPECT_TRUE(HasEnv(*plan, "CUDA_VISIBLE_DEVICES=3"));
  EXPECT_TRUE(plan->request.isolation.hidden.empty());  // The Supervisor's to add.
}

TEST(LaunchPlanTest, ACommandRankRunsItsArgvWhereItSaysAndNeverAsTheTrainer) {
  baton::v1::StartAssignment a = Assignment();
  a.mutable_spec()->mutable_command()->add_argv("/opt/baton-trainer");  // argv[0] no matter.
  a.mutable_spec()->mutable_command()->add_argv("--steps=3");
  a.mutable_spec()->mutable_command()->set_working_dir("/data/run");
  a.mutable_spec()->set_checkpoint_dir("/data/ckpt");
  (*a.mutable_spec()->mutable_env())["RANK"] = "5";  // Reserved: the worker sets it.
  const absl::StatusOr<RankLaunchPlan> plan = PlanRankLaunch(a, Rank(0), {}, kOptions);
  ASSERT_OK(plan);
  EXPECT_THAT(plan->request.argv, ElementsAre("/opt/baton-trainer", "--steps=3"));
  EXPECT_FALSE(plan->request.builtin_trainer);
  EXPECT_EQ(plan->request.working_dir, "/data/run");
  EXPECT_THAT(plan->required_dirs, ElementsAre("/w/jobs/j-7/gen-3/rank-0"));
  EXPECT_THAT(plan->best_effort_dirs, IsEmpty());
  EXPECT_THAT(plan->ignored_env, ElementsAre("RANK"));
  EXPECT_TRUE(HasEnv(*plan, "RANK=0"));
  EXPECT_FALSE(HasEnv(*plan, "RANK=5"));
}

TEST(LaunchPlanTest, ASpecWithoutWorkIsRefused) {
  baton::v1::StartAssignment a = Assignment();
  EXPECT_THAT(PlanRankLaunch(a, Rank(0), {}, kOptions),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("neither")));
  a.mutable_spec()->mutable_command();
  EXPECT_THAT(PlanRankLaunch(a, Rank(0), {}, kOptions),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("argv is empty")));
}

}  // namespace
}  // namespace baton::worker
