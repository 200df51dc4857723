#include "worker/trainer/device/precision.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/device/compat.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

TEST(PrecisionTest, Parse) {
  EXPECT_EQ(*ParsePrecision(""), Precision::kFp32);
  EXPECT_EQ(*ParsePrecision("fp32"), Precision::kFp32);
  EXPECT_EQ(*ParsePrecision("bf16"), Precision::kBf16);
  EXPECT_EQ(*ParsePrecision("fp16"), Precision::kFp16);
  EXPECT_THAT(ParsePrecision("fp8"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--precision=fp8")));
  EXPECT_STREQ(PrecisionName(Precision::kBf16), "bf16");
}

TEST(PrecisionTest, Plans) {
  const PrecisionPlan fp32 = PlanPrecision(Precision::kFp32, c10::kCPU);
  EXPECT_FALSE(fp32.autocast);
  EXPECT_FALSE(fp32.loss_scaling);
  const PrecisionPlan bf16 = PlanPrecision(Precision::kBf16, c10::kCPU);
  EXPECT_TRUE(bf16.autocast);
  EXPECT_EQ(bf16.dtype, c10::kBFloat16);
  EXPECT_FALSE(bf16.loss_scaling);
  EXPECT_TRUE(bf16.note.empty());
  const PrecisionPlan fp16 = PlanPrecision(Precision::kFp16, c10::kCPU);
  EXPECT_TRUE(fp16.loss_scaling);
  EXPECT_EQ(fp16.autocast, compat::AutocastSupported(c10::kCPU, c10::kHalf));
  EXPECT_EQ(fp16.note.empty(), fp16.autocast);
  const PrecisionPlan cuda = PlanPrecision(Precision::kFp16, c10::kCUDA);
  EXPECT_TRUE(cuda.autocast && cuda.loss_scaling);
}

TEST(PrecisionTest, Bf16AutocastScopeOnCpu) {
  torch::nn::Linear linear(8, 4);
  const at::Tensor x = at::randn({2, 8});
  const at::Tensor y = at::randint(4, {2}, at::kLong);
  {
    AutocastScope scope(PlanPrecision(Precision::kBf16, c10::kCPU));
    const at::Tensor logits = linear(x);
    EXPECT_EQ(logits.scalar_type(), at::kBFloat16);
    // Losses run in float32 under autocast.
    EXPECT_EQ(torch::nn::functional::cross_entropy(logits, y).scalar_type(), at::kFloat);
    {
      AutocastScope off(PlanPrecision(Precision::kFp32, c10::kCPU));  // No-op scope.
      EXPECT_EQ(linear(x).scalar_type(), at::kBFloat16);
    }
  }
  EXPECT_FALSE(compat::IsAutocastEnabled(c10::kCPU));
  EXPECT_EQ(linear(x).scalar_type(), at::kFloat);
  // Parameters stay float32.
  EXPECT_EQ(linear->weight.scalar_type(), at::kFloat);
}

}  // namespace
}  // namespace baton::trainer
