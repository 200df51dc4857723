#include "worker/trainer/step/grad_clip.h"

#include <ATen/ATen.h>
#include <torch/types.h>
#include <torch/nn/utils/clip_grad.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

// Two parameter sets with identical gradients; one is clipped by us, one by LibTorch.
struct Twin {
  std::vector<at::Tensor> ours;
  std::vector<at::Tensor> reference;
};

Twin MakeTwin(double grad_scale) {
  at::Generator gen = at::detail::createCPUGenerator(7);
  Twin twin;
  for (const std::vector<int64_t>& shape :
       std::vector<std::vector<int64_t>>{{4, 5}, {5}, {3, 3, 2}}) {
    const at::Tensor grad = at::randn(shape, gen, at::kFloat) * grad_scale;
    at::Tensor a = at::zeros(shape).requires_grad_();
    at::Tensor b = at::zeros(shape).requires_grad_();
    a.mutable_grad() = grad.clone();
    b.mutable_grad() = grad.clone();
    twin.ours.push_back(a);
    twin.reference.push_back(b);
  }
  // A parameter without a gradient is ignored by both.
  twin.ours.push_back(at::zeros({2}).requires_grad_());
  twin.reference.push_back(at::zeros({2}).requires_grad_());
  return twin;
}

TEST(GradClipTest, MatchesLibTorchClipGradNorm) {
  for (const double scale : {0.01, 1.0, 100.0}) {
    for (const double max_norm : {0.5, 1.0, 1e6}) {
      Twin twin = MakeTwin(scale);
      const double want = torch::nn::utils::clip_grad_norm_(twin.reference, max_norm);
      const double got = ClipGradNorm(twin.ours, max_norm);
      EXPECT_NEAR(got, want, 1e-6 * want) << scale << " " << max_norm;
      for (size_t i = 0; i < 3; ++i) {
        EXPECT_TRUE(at::allclose(twin.ours[i].grad(), twin.reference[i].grad(), 1e-6, 1e-9))
            << scale << " " << max_norm << " param " << i;
      }
      double clipped = 0;
      for (size_t i = 0; i < 3; ++i) clipped += twin.ours[i].grad().pow(2).sum().item<double>();
      EXPECT_LE(std::sqrt(clipped), std::max(max_norm, 0.0) * (1 + 1e-5) + 1e-9);
      EXPECT_FALSE(twin.ours[3].grad().defined());
    }
  }
}

TEST(GradClipTest, GradNormDoesNotClip) {
  Twin twin = MakeTwin(100.0);
  const double want = torch::nn::utils::clip_grad_norm_(twin.reference, 1e30);
  const at::Tensor before = twin.ours[0].grad().clone();
  EXPECT_NEAR(GradNorm(twin.ours), want, 1e-6 * want);
  EXPECT_TRUE(twin.ours[0].grad().equal(before));
  EXPECT_EQ(GradNorm({at::zeros({2}).requires_grad_()}), 0.0);
}

}  // namespace
}  // namespace baton::trainer
