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
       "restart 1 of 3 user-code restarts since the last healthy progress, after 500ms"},
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
       "(1 of 1 user-code restarts used since the job last made healthy progress)"},
      {"zero budget fails the first failure",
       0,
       3,
       {},
       kUser,
       1,
       5,
       Kind::kBudgetExhausted,
       absl::ZeroDuration(),
       "(0 of 0 user-code restarts used since"},
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

// A long job killed again and again, training 150 steps past each resume (the default
// healthy_steps is 100) before the next kill: it never runs out of budget, and every
// restart waits the initial backoff.
TEST(RestartPolicyTest, ALongJobWithProgressBetweenFailuresSurvivesThemAll) {
  baton::v1::Job job;
  job.mutable_spec()->mutable_restart_policy()->set_max_user_restarts(3);
  int64_t resumed = 0;
  for (int64_t generation = 1; generation <= 20; ++generation) {
    SCOPED_TRACE(generation);
    const RestartDecision d =
        DecideRestart(&job, MakeFailure(baton::v1::FAILURE_CLASS_USER, generation, resumed + 150));
    ASSERT_EQ(d.kind, Kind::kRestart) << d.message;
    EXPECT_EQ(d.backoff, absl::Milliseconds(500));
    EXPECT_TRUE(LastFailure(&job)->healthy_before());
    EXPECT_THAT(d.message, HasSubstr("restart 1 of 3 user-code restarts since the last healthy"));
    resumed += 150 - 20;  // the next generation resumes from a checkpoint 20 steps back
    LastFailure(&job)->set_resumed_step(resumed);
  }
  EXPECT_EQ(job.restarts().user(), 20);  // the lifetime count
  EXPECT_EQ(job.restarts().recent_user(), 1);
}

// A rank that fails soon after every start (a few steps each time, never the same step):
// the budget runs out as before, the backoff doubling.
TEST(RestartPolicyTest, FailuresWithoutProgressBetweenThemSpendTheBudget) {
  baton::v1::Job job;
  job.mutable_spec()->mutable_restart_policy()->set_max_user_restarts(3);
  int64_t resumed = 0;
  const absl::Duration want[] = {absl::Milliseconds(500), absl::Seconds(1), absl::Seconds(2)};
  for (int64_t generation = 1; generation <= 3; ++generation) {
    const RestartDecision d = DecideRestart(
        &job, MakeFailure(baton::v1::FAILURE_CLASS_USER, generation, resumed + generation));
    ASSERT_EQ(d.kind, Kind::kRestart) << d.message;
    EXPECT_EQ(d.backoff, want[generation - 1]);
    EXPECT_FALSE(LastFailure(&job)->healthy_before());
    LastFailure(&job)->set_resumed_step(resumed);
  }
  const RestartDecision d =
      DecideRestart(&job, MakeFailure(baton::v1::FAILURE_CLASS_USER, 4, resumed + 9));
  EXPECT_EQ(d.kind, Kind::kBudgetExhausted);
  EXPECT_THAT(d.message, HasSubstr("(3 of 3 user-code restarts used since the job last made "
                                   "healthy progress)"));
}

// Without steps (a command job), time RUNNING counts: healthy_time, default 10 min.
TEST(RestartPolicyTest, TimeRunningCountsAsProgressForJobsWithoutSteps) {
  const absl::Time start = absl::FromUnixSeconds(1'000'000);
  baton::v1::Job job;
  *job.mutable_start_time() = ToProto(start);
  baton::v1::RestartPolicy policy;
  policy.set_healthy_steps(100);
  *policy.mutable_healthy_time() = ToProto(absl::Minutes(10));
  baton::v1::Failure f = MakeFailure(baton::v1::FAILURE_CLASS_USER, 1, std::nullopt);
  *f.mutable_occurred_time() = ToProto(start + absl::Minutes(9));
  EXPECT_FALSE(MadeHealthyProgress(job, f, policy));
  *f.mutable_occurred_time() = ToProto(start + absl::Minutes(10));
  EXPECT_TRUE(MadeHealthyProgress(job, f, policy));
  // A later generation counts from when it was RUNNING (the previous failure's record).
  baton::v1::Failure* previous = job.mutable_restarts()->add_failures();
  previous->set_next_generation(2);
  *previous->mutable_running_time() = ToProto(start + absl::Minutes(30));
  f.set_generation(2);
  *f.mutable_occurred_time() = ToProto(start + absl::Minutes(35));
  EXPECT_FALSE(MadeHealthyProgress(job, f, policy));
  // 0 turns a measure off.
  policy.set_healthy_steps(0);
  f.set_step(1'000'000);
  EXPECT_FALSE(MadeHealthyProgress(job, f, policy));
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

// Ranks waiting for the next generation are kept only where their process is unharmed, the
// trainer restores from memory and the next generation starts soon.
TEST(KeepsWaitingRanksTest, OnlySnapshottingTrainerJobsAfterAPeersLoss) {
  baton::v1::JobSpec trainer;
  trainer.mutable_trainer()->set_model("mlp");
  for (auto reason :
       {baton::v1::FAILURE_REASON_RANK_FAILED, baton::v1::FAILURE_REASON_OOM_KILLED,
        baton::v1::FAILURE_REASON_WORKER_LOST, baton::v1::FAILURE_REASON_LEASE_EXPIRED}) {
    EXPECT_TRUE(KeepsWaitingRanks(trainer, reason, absl::ZeroDuration())) << reason;
  }
  for (auto reason :
       {baton::v1::FAILURE_REASON_STALLED, baton::v1::FAILURE_REASON_DRAINING,
        baton::v1::FAILURE_REASON_SCALING_UP, baton::v1::FAILURE_REASON_ASSIGNMENT_FAILED,
        baton::v1::FAILURE_REASON_WORKER_RESTARTED, baton::v1::FAILURE_REASON_REATTACH_TIMEOUT}) {
    EXPECT_FALSE(KeepsWaitingRanks(trainer, reason, absl::ZeroDuration())) << reason;
  }
  const auto rank_failed = baton::v1::FAILURE_REASON_RANK_FAILED;
  const absl::Duration kNone = absl::ZeroDuration();
  // Not when the next generation starts later than workers keep a process waiting.
  EXPECT_TRUE(KeepsWaitingRanks(trainer, rank_failed, kKeepWaitingMaxBackoff));
  EXPECT_FALSE(
      KeepsWaitingRanks(trainer, rank_failed, kKeepWaitingMaxBackoff + absl::Milliseconds(1)));
  baton::v1::JobSpec no_snapshots = trainer;
  no_snapshots.mutable_trainer()->set_snapshot_every(-1);
  EXPECT_FALSE(KeepsWaitingRanks(no_snapshots, rank_failed, kNone));
  baton::v1::JobSpec every_10 = trainer;
  every_10.mutable_trainer()->set_snapshot_every(10);
  EXPECT_TRUE(KeepsWaitingRanks(every_10, rank_failed, kNone));
  baton::v1::JobSpec zero = trainer;  // Restores its last periodic snapshot, resharded.
  zero.mutable_trainer()->mutable_zero()->set_stage(1);
  EXPECT_TRUE(KeepsWaitingRanks(zero, rank_failed, kNone));
  zero.mutable_trainer()->set_snapshot_every(-1);
  EXPECT_FALSE(KeepsWaitingRanks(zero, rank_failed, kNone));
  baton::v1::JobSpec pipeline = trainer;
  pipeline.mutable_trainer()->mutable_pipeline()->set_stages(2);
  EXPECT_FALSE(KeepsWaitingRanks(pipeline, rank_failed, kNone));
  baton::v1::JobSpec command;
  command.mutable_command()->add_argv("python3");
  EXPECT_FALSE(KeepsWaitingRanks(command, rank_failed, kNone));
}

}  // namespace
}  // namespace baton::coordinator
