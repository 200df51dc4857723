#include "worker/trainer/snapshot/snapshot_interval.h"

#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

absl::Duration Ms(double ms) { return absl::Microseconds(ms * 1000); }

TEST(AutoSnapshotIntervalTest, NothingMeasuredYetDecidesNothing) {
  EXPECT_EQ(AutoSnapshotInterval({}, kSnapshotBudgetWithLossSnapshots), std::nullopt);
  SnapshotCosts costs;
  costs.copy = Ms(1);
  EXPECT_EQ(AutoSnapshotInterval(costs, kSnapshotBudgetWithLossSnapshots), std::nullopt);
}

TEST(AutoSnapshotIntervalTest, TheFewestStepsThatKeepTheCostWithinTheBudget) {
  struct Case {
    double clean_step, copy_step, plan, copy, budget;
    int64_t interval;
  };
  const Case cases[] = {
      // A 0.95 ms copy in 10 ms steps: every 10 steps within 1 %, every 2 within 5 %.
      {10, 10, 0, 0.95, kSnapshotBudgetWithLossSnapshots, 10},
      {10, 10, 0, 0.95, kSnapshotBudget, 2},
      // Planning counts too: (0.25 + 1) / (0.01 x 10) = 12.5.
      {10, 10, 0.25, 1, kSnapshotBudgetWithLossSnapshots, 13},
      // Steps slowed by more than the copy's own time: the slowdown is the cost.
      {10, 12.95, 0, 1, kSnapshotBudgetWithLossSnapshots, 30},
      // Steps that seem to hide the copy (no slower, or faster within the noise): the copy
      // is counted whole.
      {10, 9.5, 0, 0.95, kSnapshotBudgetWithLossSnapshots, 10},
      // Cheap enough: every step.
      {10, 10, 0.01, 0.04, kSnapshotBudget, 1},
      {10, 10, 0, 0.09, kSnapshotBudgetWithLossSnapshots, 1},
      // Never rarer than every kMaxSnapshotInterval steps.
      {1, 1, 0, 50, kSnapshotBudgetWithLossSnapshots, kMaxSnapshotInterval},
  };
  for (const Case& c : cases) {
    SnapshotCosts costs;
    costs.step = Ms(c.clean_step);
    costs.clean_step = Ms(c.clean_step);
    costs.copy_step = Ms(c.copy_step);
    costs.plan = Ms(c.plan);
    costs.copy = Ms(c.copy);
    EXPECT_EQ(AutoSnapshotInterval(costs, c.budget), c.interval)
        << "clean " << c.clean_step << " copy step " << c.copy_step << " plan " << c.plan
        << " copy " << c.copy << " budget " << c.budget;
  }
}

TEST(AutoSnapshotIntervalTest, WithoutCleanStepsMeasuredTheAverageStepIsUsed) {
  SnapshotCosts costs;
  costs.step = Ms(20);
  costs.copy_step = Ms(25);  // No clean step to compare with: the copy alone counts.
  costs.copy = Ms(0.95);
  EXPECT_EQ(SnapshotCost(costs), Ms(0.95));
  // 0.95 / 0.2, rounded up.
  EXPECT_EQ(AutoSnapshotInterval(costs, kSnapshotBudgetWithLossSnapshots), 5);
}

}  // namespace
}  // namespace baton::trainer
