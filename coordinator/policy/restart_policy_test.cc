#include "coordinator/policy/restart_policy.h"

#include <optional>
#include <string>
#include <vector>

#include "common/time/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;
using Kind = RestartDecision::Kind;

struct PastFailure {
  baton::v1::FailureClass failure_class;
  int64_t generation;
  std::optional<int64_t> step;
};

struct Case {
  std::string name;
  int max_user = 3;
  int max_infra = 3;
  std::vector<PastFailure> past;  // recorded as restarts, in order
  baton::v1::FailureClass failure_class;
  int64_t generation;
  std::optional<int64_t> step;
  Kind want;
  absl::Duration want_backoff;  // kRestart only
  std::string want_message;     // a substring
};

baton::v1::Failure MakeFailure(baton::v1::FailureClass c, int64_t generation,
                               std::optional<int64_t> step) {
  baton::v1::Failure f;
  f.set_failure_class(c);
  f.set_generation(generation);
  if (step.has_value()) f.set_step(*step);
  f.set_reason("R");
  f.set_cause("the cause");
  return f;
}

TEST(RestartPolicyTest, Table) {
  constexpr auto kUser = baton::v1::FAILURE_CLASS_USER;
  constexpr auto kInfra = baton::v1::FAILURE_CLASS_INFRA;
  const std::vector<Case> cases = {
      {"first failure restarts after the initial backoff",
       3,
       3,
       {},
       kUser,
       1,
       5,
       Kind::kRestart,
       absl::Milliseconds(500),
       "restart 1 of 3 user-code restarts after 500ms"},
      {"backoff doubles across classes",
       3,
       3,
       {{kInfra, 1, 5}, {kInfra, 2, 9}},
       kUser,
       3,
       12,
       Kind::kRestart,
       absl::Seconds(2),
       "restart 1 of 3 user-code"},
      {"same user step twice is a crash loop",
       3,
       3,
       {{kUser, 1, 5}},
       kUser,
       2,
       5,
       Kind::kCrashLoop,
       absl::ZeroDuration(),
       "generations 1 and 2 both failed at step 5"},
      {"no step twice is a crash loop",
       3,
       3,
       {{kUser, 1, std::nullopt}},
       kUser,
       2,
       std::nullopt,
       Kind::kCrashLoop,
       absl::ZeroDuration(),
       "no step reported"},
      {"an infra failure between breaks the loop",
       3,
       3,
       {{kUser, 1, 5}, {kInfra, 2, 5}},
       kUser,
       3,
       5,
       Kind::kRestart,
       absl::Seconds(2),
       "restart 2 of 3"},
      {"progress breaks the loop",
       3,
       3,
       {{kUser, 1, 5}},
       kUser,
       2,
       6,
       Kind::kRestart,
       absl::Seconds(1),
       "restart 2 of 3"},
      {"budget spent",
       1,
       3,
       {{kUser, 1, 5}},
       kUser,
       2,
       9,
       Kind::kBudgetExhausted,
       absl::ZeroDuration(),
       "user-code failure in generation 2 with the restart budget spent "
       "(1 of 1 user-code restarts used)"},
      {"zero budget fails the first failure",
       0,
       3,
       {},
       kUser,
       1,
       5,
       Kind::kBudgetExhausted,
       absl::ZeroDuration(),
       "(0 of 0 user-code restarts used)"},
      {"budgets are per class",
       1,
       3,
       {{kUser, 1, 5}},
       kInfra,
       2,
       9,
       Kind::kRestart,
       absl::Seconds(1),
       "restart 1 of 3 infrastructure restarts"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    baton::v1::Job job;
    job.mutable_spec()->mutable_restart_policy()->set_max_user_restarts(c.max_user);
    job.mutable_spec()->mutable_restart_policy()->set_max_infra_restarts(c.max_infra);
    for (const PastFailure& p : c.past) {
      ASSERT_EQ(DecideRestart(&job, MakeFailure(p.failure_class, p.generation, p.step)).kind,
                Kind::kRestart);
    }
    const int before = job.restarts().failures_size();
    const RestartDecision d =
        DecideRestart(&job, MakeFailure(c.failure_class, c.generation, c.step));
    EXPECT_EQ(d.kind, c.want);
    EXPECT_THAT(d.message, HasSubstr(c.want_message));
    EXPECT_THAT(d.message, HasSubstr("the cause"));
    ASSERT_EQ(job.restarts().failures_size(), before + 1) << "the failure is always recorded";
    const baton::v1::Failure& recorded = *LastFailure(&job);
    if (c.want == Kind::kRestart) {
      EXPECT_EQ(d.backoff, c.want_backoff);
      EXPECT_EQ(d.reason, "R");
      EXPECT_EQ(FromProto(recorded.backoff()), c.want_backoff);
      EXPECT_EQ(recorded.next_generation(), c.generation + 1);
    } else {
      EXPECT_EQ(d.reason, c.want == Kind::kCrashLoop ? "CrashLoop" : "RestartBudgetExhausted");
      EXPECT_EQ(recorded.next_generation(), 0) << "a failure that ends the job restarts nothing";
    }
  }
}

TEST(RestartPolicyTest, PlannedRestartsUseNoBudgetAndNoBackoff) {
  baton::v1::Job job;
  job.mutable_spec()->mutable_restart_policy()->set_max_user_restarts(0);
  RecordPlannedRestart(&job, MakeFailure(baton::v1::FAILURE_CLASS_PLANNED, 4, 7));
  EXPECT_EQ(job.restarts().planned(), 1);
  EXPECT_EQ(LastFailure(&job)->next_generation(), 5);
  EXPECT_EQ(FromProto(LastFailure(&job)->backoff()), absl::ZeroDuration());
  // Planned resizes count in no budget and make no backoff grow.
  const RestartDecision d = DecideRestart(&job, MakeFailure(baton::v1::FAILURE_CLASS_INFRA, 5, 9));
  EXPECT_EQ(d.kind, Kind::kRestart);
  EXPECT_EQ(d.backoff, absl::Milliseconds(500));
}

}  // namespace
}  // namespace baton::coordinator
