#include "worker/trainer/optim/lr_schedule.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

struct Case {
  std::string name;
  LrScheduleOptions options;
  std::vector<std::pair<int64_t, double>> expected;  // step -> lr
};

LrScheduleOptions Opts(std::string kind, double lr) {
  LrScheduleOptions o;
  o.kind = std::move(kind);
  o.base_lr = lr;
  return o;
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  {
    Case c{"constant", Opts("constant", 0.1), {{0, 0.1}, {1, 0.1}, {1000000, 0.1}}};
    cases.push_back(c);
  }
  {
    Case c{"empty_kind_is_constant", Opts("", 0.1), {{0, 0.1}, {7, 0.1}}};
    cases.push_back(c);
  }
  {
    Case c{"constant_warmup",
           Opts("constant", 1.0),
           {{-3, 0.25}, {0, 0.25}, {1, 0.5}, {2, 0.75}, {3, 1.0}, {4, 1.0}, {100, 1.0}}};
    c.options.warmup_steps = 4;
    cases.push_back(c);
  }
  {
    // (1 + cos(pi * s / 4)) / 2.
    Case c{"cosine",
           Opts("cosine", 1.0),
           {{0, 1.0},
            {1, 0.85355339059327373},
            {2, 0.5},
            {3, 0.14644660940672624},
            {4, 0.0},
            {10, 0.0}}};
    c.options.total_steps = 4;
    cases.push_back(c);
  }
  {
    // Warmup 2, then 0.1 + 0.9 * (1 + cos(pi * (s - 2) / 4)) / 2, min_lr from s = 6 on.
    Case c{"cosine_warmup_min_lr",
           Opts("cosine", 1.0),
           {{0, 0.5},
            {1, 1.0},
            {2, 1.0},
            {3, 0.86819805153394636},
            {4, 0.55},
            {5, 0.23180194846605362},
            {6, 0.1},
            {50, 0.1}}};
    c.options.warmup_steps = 2;
    c.options.total_steps = 6;
    c.options.min_lr = 0.1;
    cases.push_back(c);
  }
  {
    Case c{
        "step", Opts("step", 1.0), {{0, 1.0}, {2, 1.0}, {3, 0.5}, {5, 0.5}, {6, 0.25}, {9, 0.125}}};
    c.options.step_size = 3;
    c.options.gamma = 0.5;
    cases.push_back(c);
  }
  {
    Case c{"step_warmup",
           Opts("step", 0.8),
           {{0, 0.4}, {1, 0.8}, {2, 0.8}, {3, 0.8}, {4, 0.08}, {5, 0.08}, {6, 0.008}}};
    c.options.warmup_steps = 2;
    c.options.step_size = 2;
    c.options.gamma = 0.1;
    cases.push_back(c);
  }
  {
    // Linear scaling: 0.1 * 512 / 256.
    Case c{"linear_scaling", Opts("constant", 0.1), {{0, 0.2}, {99, 0.2}}};
    c.options.base_batch = 256;
    c.options.global_batch = 512;
    cases.push_back(c);
  }
  {
    // Peak 0.05 * 128 / 64 = 0.1; min_lr is not scaled: 0.01 + 0.09 * (1 + cos(pi s/2)) / 2.
    Case c{"cosine_scaled", Opts("cosine", 0.05), {{0, 0.1}, {1, 0.055}, {2, 0.01}}};
    c.options.total_steps = 2;
    c.options.min_lr = 0.01;
    c.options.base_batch = 64;
    c.options.global_batch = 128;
    cases.push_back(c);
  }
  return cases;
}

class LrScheduleTableTest : public ::testing::TestWithParam<Case> {};

TEST_P(LrScheduleTableTest, MatchesTable) {
  const Case& c = GetParam();
  absl::StatusOr<LrSchedule> schedule = LrSchedule::Create(c.options);
  ASSERT_OK(schedule);
  for (const auto& [step, lr] : c.expected) {
    EXPECT_NEAR(schedule->LrAt(step), lr, 1e-15) << "step " << step;
  }
}

INSTANTIATE_TEST_SUITE_P(Schedules, LrScheduleTableTest, ::testing::ValuesIn(Cases()),
                         [](const auto& info) { return info.param.name; });

TEST(LrScheduleTest, ExactValuesWherePowersOfTwo) {
  LrScheduleOptions o = Opts("step", 1.0);
  o.step_size = 1;
  o.gamma = 0.5;
  ASSERT_OK(LrSchedule::Create(o));
  const LrSchedule s = *LrSchedule::Create(o);
  EXPECT_EQ(s.LrAt(0), 1.0);
  EXPECT_EQ(s.LrAt(10), 1.0 / 1024);
  EXPECT_EQ(s.kind(), LrScheduleKind::kStep);
}

// The lr depends on the global step only: a schedule recreated after a restart (or with
// another world size, which only rescales the peak) continues the same curve.
TEST(LrScheduleTest, RestartAndResizeKeepThePositionOnTheCurve) {
  LrScheduleOptions o = Opts("cosine", 0.1);
  o.warmup_steps = 10;
  o.total_steps = 110;
  o.base_batch = 64;
  o.global_batch = 64 * 4;
  const LrSchedule before = *LrSchedule::Create(o);
  const LrSchedule restarted = *LrSchedule::Create(o);
  o.global_batch = 64 * 2;  // Half the ranks after a resize.
  const LrSchedule resized = *LrSchedule::Create(o);
  EXPECT_DOUBLE_EQ(before.peak_lr(), 0.4);
  EXPECT_DOUBLE_EQ(resized.peak_lr(), 0.2);
  for (int64_t step : {0, 5, 10, 37, 60, 109, 110, 500}) {
    EXPECT_EQ(before.LrAt(step), restarted.LrAt(step));
    EXPECT_NEAR(before.LrAt(step) / before.peak_lr(), resized.LrAt(step) / resized.peak_lr(),
                1e-15);
  }
}

TEST(LrScheduleTest, ScaledLearningRate) {
  EXPECT_EQ(ScaledLearningRate(0.1, 1024, 0), 0.1);
  EXPECT_EQ(ScaledLearningRate(0.5, 512, 256), 1.0);
  EXPECT_EQ(ScaledLearningRate(1.0, 64, 256), 0.25);
}

TEST(LrScheduleTest, RejectsBadOptions) {
  using absl::StatusCode;
  auto create = [](auto mutate) {
    LrScheduleOptions o = Opts("cosine", 0.1);
    o.total_steps = 100;
    mutate(o);
    return LrSchedule::Create(o).status();
  };
  EXPECT_THAT(create([](auto& o) { o.kind = "linear"; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.lr_schedule")));
  EXPECT_THAT(create([](auto& o) { o.base_lr = 0; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.lr")));
  EXPECT_THAT(create([](auto& o) { o.total_steps = 0; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("step budget")));
  EXPECT_THAT(create([](auto& o) { o.warmup_steps = 100; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.warmup_steps")));
  EXPECT_THAT(create([](auto& o) { o.warmup_steps = -1; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.warmup_steps")));
  EXPECT_THAT(create([](auto& o) { o.min_lr = 0.2; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.min_lr")));
  EXPECT_THAT(create([](auto& o) { o.base_batch = 256; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.base_batch")));
  EXPECT_THAT(create([](auto& o) { o.kind = "step"; }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.lr_step_size")));
  EXPECT_THAT(create([](auto& o) {
                o.kind = "step";
                o.step_size = 5;
                o.gamma = 0;
              }),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.lr_gamma")));
  // Constant needs no budget.
  EXPECT_OK(create([](auto& o) {
    o.kind = "constant";
    o.total_steps = 0;
  }));
}

}  // namespace
}  // namespace baton::trainer
