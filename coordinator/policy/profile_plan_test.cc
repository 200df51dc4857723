#include "coordinator/policy/profile_plan.h"

#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/protocol_version.h"
#include "common/testing/status_matchers.h"
#include "common/time/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// A RUNNING trainer job of 4 ranks: 0 and 1 on w1, 2 and 3 on w2; log_every 10.
baton::v1::Job RunningJob() {
  baton::v1::Job job;
  job.set_id("j-1");
  job.set_generation(2);
  job.set_state(baton::v1::JOB_STATE_RUNNING);
  job.mutable_spec()->mutable_trainer()->set_log_every(10);
  for (int r = 0; r < 4; ++r) {
    baton::v1::RankInfo* rank = job.add_ranks();
    rank->set_rank(r);
    rank->set_worker_id(r < 2 ? "w1" : "w2");
  }
  return job;
}

ProfileFacts Facts(const baton::v1::Job* job) {
  ProfileFacts facts;
  facts.job = job;
  facts.last_step = 40;
  facts.median_step_time = absl::Milliseconds(100);
  facts.workers["w1"] = {true, kProfileProtocolVersion};
  facts.workers["w2"] = {true, kProfileProtocolVersion};
  return facts;
}

baton::v1::ProfileJobRequest Request(int64_t steps, std::vector<int32_t> ranks = {}) {
  baton::v1::ProfileJobRequest request;
  request.set_job_id("j-1");
  request.set_steps(steps);
  for (int32_t r : ranks) request.add_ranks(r);
  return request;
}

TEST(ProfilePlanTest, EveryRankByDefaultAWindowAheadOfTheNewestStep) {
  const baton::v1::Job job = RunningJob();
  const absl::StatusOr<ProfilePlan> plan = PlanProfile(Request(5), Facts(&job));
  ASSERT_OK(plan);
  EXPECT_THAT(plan->rank_workers,
              ElementsAre(Pair(0, "w1"), Pair(1, "w1"), Pair(2, "w2"), Pair(3, "w2")));
  EXPECT_THAT(plan->by_worker,
              ElementsAre(Pair("w1", ElementsAre(0, 1)), Pair("w2", ElementsAre(2, 3))));
  // 40 + log_every 10 + (3 s / 100 ms + 1) = 81.
  EXPECT_EQ(plan->start_step, 81);
  // 2 x 100 ms x 46 steps to the window's end is below the default.
  EXPECT_EQ(plan->timeout, kDefaultProfileTimeout);
}

TEST(ProfilePlanTest, AskedRanksOnlyAndTheTimeoutFollowsSlowSteps) {
  const baton::v1::Job job = RunningJob();
  ProfileFacts facts = Facts(&job);
  facts.median_step_time = absl::Seconds(10);
  facts.workers["w1"].connected = false;  // Not asked: no matter.
  const absl::StatusOr<ProfilePlan> plan = PlanProfile(Request(20, {3}), facts);
  ASSERT_OK(plan);
  EXPECT_THAT(plan->rank_workers, ElementsAre(Pair(3, "w2")));
  EXPECT_EQ(plan->start_step, 40 + 10 + 1);                     // 3 s of 10 s steps: 1 step.
  EXPECT_EQ(plan->timeout, 2 * absl::Seconds(10) * (11 + 20));  // 620 s
  // Without a step time: 1% of the lead cap.
  facts.median_step_time = absl::ZeroDuration();
  EXPECT_EQ(PlanProfile(Request(20, {3}), facts)->start_step, 40 + 10 + kMaxProfileLeadSteps / 100);
  // An explicit timeout is kept.
  baton::v1::ProfileJobRequest timed = Request(20, {3});
  *timed.mutable_timeout() = ToProto(absl::Seconds(7));
  EXPECT_EQ(PlanProfile(timed, facts)->timeout, absl::Seconds(7));
}

// Each refusal: the request or the facts changed from the servable case, and the status.
TEST(ProfilePlanTest, Refusals) {
  struct Case {
    std::string what;
    std::function<void(baton::v1::ProfileJobRequest&, baton::v1::Job&, ProfileFacts&)> change;
    absl::StatusCode code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"no steps", [](auto& r, auto&, auto&) { r.set_steps(0); },
       absl::StatusCode::kInvalidArgument, "steps: 0"},
      {"too many steps", [](auto& r, auto&, auto&) { r.set_steps(kMaxProfileSteps + 1); },
       absl::StatusCode::kInvalidArgument, "steps: 1001"},
      {"zero timeout",
       [](auto& r, auto&, auto&) { *r.mutable_timeout() = ToProto(absl::ZeroDuration()); },
       absl::StatusCode::kInvalidArgument, "timeout"},
      {"long timeout",
       [](auto& r, auto&, auto&) {
         *r.mutable_timeout() = ToProto(kMaxProfileTimeout + absl::Seconds(1));
       },
       absl::StatusCode::kInvalidArgument, "timeout"},
      {"not running", [](auto&, auto& j, auto&) { j.set_state(baton::v1::JOB_STATE_RESTARTING); },
       absl::StatusCode::kFailedPrecondition, "only a RUNNING job"},
      {"command job", [](auto&, auto& j, auto&) { j.mutable_spec()->mutable_command(); },
       absl::StatusCode::kFailedPrecondition, "runs a command"},
      {"no step yet", [](auto&, auto&, auto& f) { f.last_step.reset(); },
       absl::StatusCode::kFailedPrecondition, "has not reported a step"},
      {"rank outside", [](auto& r, auto&, auto&) { r.add_ranks(4); },
       absl::StatusCode::kInvalidArgument, "ranks: 4"},
      {"negative rank", [](auto& r, auto&, auto&) { r.add_ranks(-1); },
       absl::StatusCode::kInvalidArgument, "ranks: -1"},
      {"worker gone", [](auto&, auto&, auto& f) { f.workers["w2"].connected = false; },
       absl::StatusCode::kUnavailable, "worker w2"},
      {"old worker", [](auto&, auto&, auto& f) { f.workers["w1"].protocol_version = 3; },
       absl::StatusCode::kFailedPrecondition, "protocol version 3"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    baton::v1::Job job = RunningJob();
    ProfileFacts facts = Facts(&job);
    baton::v1::ProfileJobRequest request = Request(5);
    c.change(request, job, facts);
    EXPECT_THAT(PlanProfile(request, facts), StatusIs(c.code, HasSubstr(c.message)));
  }
}

}  // namespace
}  // namespace baton::coordinator
