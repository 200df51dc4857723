#include "worker/trainer/models/recompute.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/function.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/dropout.h>
#include <torch/nn/modules/linear.h>
#include <torch/utils.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "worker/trainer/device/compat.h"

namespace baton::trainer {
namespace {

// Linear -> BatchNorm -> GELU -> dropout -> Linear, plus `scale` times a second input.
class TestBlockImpl : public torch::nn::Module {
 public:
  explicit TestBlockImpl(double dropout) {
    torch::manual_seed(3);
    fc1_ = register_module("fc1", torch::nn::Linear(8, 16));
    bn_ = register_module("bn", torch::nn::BatchNorm1d(16));
    drop_ = register_module("drop", torch::nn::Dropout(dropout));
    fc2_ = register_module("fc2", torch::nn::Linear(16, 8));
  }
  at::Tensor forward(const at::Tensor& x, const at::Tensor& y, double scale) {
    return fc2_->forward(drop_->forward(at::gelu(bn_->forward(fc1_->forward(x))))) + scale * y;
  }

 private:
  torch::nn::Linear fc1_{nullptr}, fc2_{nullptr};
  torch::nn::BatchNorm1d bn_{nullptr};
  torch::nn::Dropout drop_{nullptr};
};
TORCH_MODULE(TestBlock);

// What one forward/backward of two stacked blocks leaves behind.
struct BlockRun {
  at::Tensor loss;
  at::Tensor x_grad;
  std::vector<std::pair<std::string, at::Tensor>> grads;    // Per parameter.
  std::vector<std::pair<std::string, at::Tensor>> buffers;  // After the step.
  at::Tensor next_random;  // The CPU generator's next draw after backward.
};

BlockRun RunBlocks(bool recompute, double dropout, bool autocast) {
  TestBlock a(dropout), b(dropout);
  torch::manual_seed(7);
  const at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  const at::Tensor y = at::randn({4, 8});  // Needs no gradient.
  const double scale = 0.5;
  auto apply = [&](TestBlock& block, const at::Tensor& in) {
    if (!recompute) return block->forward(in, y, scale);
    return Recompute(*block,
                     [&block, scale](const std::vector<at::Tensor>& t) {
                       return block->forward(t[0], t[1], scale);
                     },
                     {in, y});
  };
  BlockRun run;
  {
    if (autocast) {
      compat::SetAutocastDtype(c10::kCPU, c10::kBFloat16);
      compat::SetAutocastEnabled(c10::kCPU, true);
      compat::EnterAutocast();
    }
    at::Tensor h = apply(a, x);
    h = apply(b, h);
    run.loss = h.to(at::kFloat).pow(2).mean();
    if (autocast) {
      compat::LeaveAutocast();
      compat::SetAutocastEnabled(c10::kCPU, false);
    }
  }
  run.loss.backward();
  run.x_grad = x.grad();
  for (TestBlock* block : {&a, &b}) {
    for (const auto& p : (*block)->named_parameters()) run.grads.emplace_back(p.key(), p->grad());
    for (const auto& t : (*block)->named_buffers()) run.buffers.emplace_back(t.key(), t.value());
  }
  run.next_random = at::rand({4});
  return run;
}

void ExpectIdentical(const BlockRun& plain, const BlockRun& recomputed) {
  EXPECT_TRUE(at::equal(plain.loss, recomputed.loss));
  ASSERT_TRUE(recomputed.x_grad.defined());
  EXPECT_TRUE(at::equal(plain.x_grad, recomputed.x_grad));
  ASSERT_EQ(plain.grads.size(), recomputed.grads.size());
  for (size_t i = 0; i < plain.grads.size(); ++i) {
    ASSERT_TRUE(recomputed.grads[i].second.defined()) << plain.grads[i].first;
    EXPECT_TRUE(at::equal(plain.grads[i].second, recomputed.grads[i].second))
        << plain.grads[i].first;
  }
  ASSERT_EQ(plain.buffers.size(), recomputed.buffers.size());
  for (size_t i = 0; i < plain.buffers.size(); ++i) {
    EXPECT_TRUE(at::equal(plain.buffers[i].second, recomputed.buffers[i].second))
        << plain.buffers[i].first << " changed a different number of times";
  }
  EXPECT_TRUE(at::equal(plain.next_random, recomputed.next_random));
}

TEST(RecomputeTest, GradientsAndBuffersAreBitIdentical) {
  ExpectIdentical(RunBlocks(false, 0.0, false), RunBlocks(true, 0.0, false));
}

TEST(RecomputeTest, DropoutDrawsTheSameMasksInTheRecompute) {
  const BlockRun plain = RunBlocks(false, 0.5, false);
  ExpectIdentical(plain, RunBlocks(true, 0.5, false));
  // The masks matter: another dropout draw would give another loss.
  EXPECT_FALSE(at::equal(plain.loss, RunBlocks(false, 0.0, false).loss));
}

TEST(RecomputeTest, RecomputesUnderTheForwardsAutocastState) {
  if (!compat::AutocastSupported(c10::kCPU, c10::kBFloat16)) GTEST_SKIP();
  const BlockRun plain = RunBlocks(false, 0.0, true);
  ExpectIdentical(plain, RunBlocks(true, 0.0, true));
  EXPECT_FALSE(at::equal(plain.loss, RunBlocks(false, 0.0, false).loss));
  EXPECT_FALSE(compat::IsAutocastEnabled(c10::kCPU));
}

TEST(RecomputeTest, KeepsOnlyTheInputsAndRecordsOneNode) {
  TestBlock block(0.0);
  const at::Tensor x = at::randn({4, 8}).requires_grad_(true);
  const at::Tensor y = at::zeros({4, 8});
  const at::Tensor out = Recompute(
      *block,
      [&block](const std::vector<at::Tensor>& t) { return block->forward(t[0], t[1], 1.0); },
      {x, y});
  ASSERT_NE(out.grad_fn(), nullptr);
  // One node whose edges lead to x and the 6 parameters (+ y, which needs no gradient), not
  // the block's internal graph.
  EXPECT_EQ(out.grad_fn()->num_inputs(), 1u);
  EXPECT_EQ(out.grad_fn()->num_outputs(), 1u + 1u + 6u);
}

TEST(RecomputeTest, WithoutGradModeItIsThePlainForward) {
  TestBlock block(0.0);
  block->eval();
  const at::Tensor x = at::randn({4, 8});
  const at::Tensor y = at::zeros({4, 8});
  c10::NoGradGuard no_grad;
  const at::Tensor out = Recompute(
      *block,
      [&block](const std::vector<at::Tensor>& t) { return block->forward(t[0], t[1], 1.0); },
      {x, y});
  EXPECT_EQ(out.grad_fn(), nullptr);
  EXPECT_TRUE(at::equal(out, block->forward(x, y, 1.0)));
}

}  // namespace
}  // namespace baton::trainer
