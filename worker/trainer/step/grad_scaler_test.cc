#include "worker/trainer/step/grad_scaler.h"

#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/testing/test_ranks.h"

namespace baton::trainer {
namespace {

using ::baton::trainer::testing::RunRanks;

GradScalerOptions Enabled(int64_t growth_interval = 2000) {
  GradScalerOptions options;
  options.enabled = true;
  options.growth_interval = growth_interval;
  return options;
}

at::Tensor ParamWithGrad(const at::Tensor& grad) {
  at::Tensor p = at::zeros_like(grad).requires_grad_();
  p.mutable_grad() = grad.clone();
  return p;
}

TEST(GradScalerTest, DisabledIsTheIdentity) {
  GradScaler scaler{GradScalerOptions()};
  LocalCommunicator comm;
  EXPECT_EQ(scaler.scale(), 1.0);
  const at::Tensor loss = at::full({}, 3.0);
  EXPECT_TRUE(scaler.Scale(loss).equal(loss));
  at::Tensor p = ParamWithGrad(at::full({2}, INFINITY));
  absl::StatusOr<bool> found = scaler.UnscaleAndCheck({p}, comm);
  ASSERT_OK(found);
  EXPECT_FALSE(*found);  // No check without loss scaling.
  scaler.Update(true);
  EXPECT_EQ(scaler.scale(), 1.0);
}

TEST(GradScalerTest, ScalesAndUnscales) {
  GradScaler scaler(Enabled());
  LocalCommunicator comm;
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_EQ(scaler.Scale(at::full({}, 2.0)).item<double>(), 131072.0);
  at::Tensor p = ParamWithGrad(at::full({3}, 65536.0 * 0.25));
  at::Tensor no_grad = at::zeros({2}).requires_grad_();
  absl::StatusOr<bool> found = scaler.UnscaleAndCheck({p, no_grad}, comm);
  ASSERT_OK(found);
  EXPECT_FALSE(*found);
  EXPECT_TRUE(p.grad().equal(at::full({3}, 0.25)));
  EXPECT_FALSE(no_grad.grad().defined());
}

TEST(GradScalerTest, GrowsAfterTheIntervalAndBacksOffOnOverflow) {
  GradScaler scaler(Enabled(/*growth_interval=*/3));
  scaler.Update(false);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_EQ(scaler.growth_tracker(), 2);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 131072.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  scaler.Update(false);
  scaler.Update(false);
  scaler.Update(true);  // An overflow resets the run of clean steps.
  EXPECT_EQ(scaler.scale(), 65536.0);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  scaler.Update(false);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 65536.0);
  scaler.Update(false);
  EXPECT_EQ(scaler.scale(), 131072.0);
}

TEST(GradScalerTest, RestoreValidates) {
  GradScaler scaler(Enabled());
  ASSERT_OK(scaler.Restore(1024.0, 17));
  EXPECT_EQ(scaler.scale(), 1024.0);
  EXPECT_EQ(scaler.growth_tracker(), 17);
  EXPECT_THAT(scaler.Restore(0, 0), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(scaler.Restore(INFINITY, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(scaler.Restore(2.0, -1), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

// The inf is injected after averaging, on rank 0 only: without the flag all-reduce rank 1
// would step. Both ranks must skip and halve the scale.
TEST(GradScalerTest, AnInfOnOneRankMakesEveryRankSkip) {
  struct Result {
    bool found = false;
    double scale = 0;
  };
  for (const double bad : {static_cast<double>(INFINITY), static_cast<double>(NAN)}) {
    const std::vector<Result> got = RunRanks<Result>(2, [bad](Communicator& comm) {
      GradScaler scaler(Enabled());
      at::Tensor grad = at::full({4}, 65536.0);
      if (comm.rank() == 0) grad[2] = bad;
      at::Tensor p = ParamWithGrad(grad);
      absl::StatusOr<bool> found = scaler.UnscaleAndCheck({p}, comm);
      EXPECT_OK(found);
      scaler.Update(found.value_or(false));
      return Result{found.value_or(false), scaler.scale()};
    });
    for (const Result& r : got) {
      EXPECT_TRUE(r.found);
      EXPECT_EQ(r.scale, 32768.0);
    }
  }
  // And a clean step on both ranks is not skipped.
  const std::vector<Result> clean = RunRanks<Result>(2, [](Communicator& comm) {
    GradScaler scaler(Enabled());
    at::Tensor p = ParamWithGrad(at::full({4}, 1.0));
    absl::StatusOr<bool> found = scaler.UnscaleAndCheck({p}, comm);
    EXPECT_OK(found);
    return Result{found.value_or(true), scaler.scale()};
  });
  for (const Result& r : clean) EXPECT_FALSE(r.found);
}

}  // namespace
}  // namespace baton::trainer
