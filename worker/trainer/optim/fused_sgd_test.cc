#include "worker/trainer/optim/fused_sgd.h"

#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <torch/torch.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

// Parameters of every kind the update meets: large float32 (the fused loop, split over
// tasks), small float32, float64 and non-contiguous float32 (LibTorch's update).
std::vector<at::Tensor> Params() {
  torch::manual_seed(7);
  return {torch::randn({300001}).requires_grad_(true), torch::randn({5}).requires_grad_(true),
          torch::randn({7}, torch::kFloat64).requires_grad_(true),
          torch::randn({4, 6}).t().requires_grad_(true)};
}

std::vector<at::Tensor> Clones(const std::vector<at::Tensor>& params) {
  std::vector<at::Tensor> out;
  for (const at::Tensor& p : params) {
    at::Tensor c = p.detach().clone();
    if (!p.is_contiguous()) c = p.detach().t().clone().t();  // keep the layout
    out.push_back(c.requires_grad_(true));
  }
  return out;
}

// Sets gradients for step `t` (the same on both sides) and steps.
void Step(torch::optim::Optimizer& opt, std::vector<at::Tensor>& params, int t) {
  for (size_t i = 0; i < params.size(); ++i) {
    torch::manual_seed(100 * t + static_cast<int>(i));
    params[i].mutable_grad() = torch::randn(params[i].sizes(), params[i].options());
    if (!params[i].is_contiguous()) {
      params[i].mutable_grad() = params[i].grad().t().contiguous().t();
    }
  }
  opt.step();
}

void ExpectClose(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(torch::allclose(a[i], b[i], /*rtol=*/1e-6, /*atol=*/1e-7))
        << "parameter " << i << ": max difference " << (a[i] - b[i]).abs().max().item<double>();
  }
}

TEST(FusedSgdTest, MatchesLibTorchSgd) {
  const std::vector<torch::optim::SGDOptions> cases = {
      torch::optim::SGDOptions(0.05).momentum(0.9),
      torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-2),
      torch::optim::SGDOptions(0.05).momentum(0.9).weight_decay(1e-2).nesterov(true),
      torch::optim::SGDOptions(0.05).momentum(0.5).dampening(0.1),
      torch::optim::SGDOptions(0.05).weight_decay(1e-2),  // no momentum
  };
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(k);
    std::vector<at::Tensor> ours = Params();
    std::vector<at::Tensor> theirs = Clones(ours);
    FusedSgd fused(ours, cases[k]);
    torch::optim::SGD reference(theirs, cases[k]);
    for (int t = 0; t < 4; ++t) {
      Step(fused, ours, t);
      Step(reference, theirs, t);
    }
    ExpectClose(ours, theirs);
    // LibTorch's update for the parameters the loop does not take: exactly equal.
    EXPECT_TRUE(torch::equal(ours[2], theirs[2]));
    EXPECT_TRUE(torch::equal(ours[3], theirs[3]));
  }
}

// The state is SGD's: saved by one, loaded by the other, the steps go on alike.
TEST(FusedSgdTest, StateIsInterchangeableWithLibTorchSgd) {
  const auto options = torch::optim::SGDOptions(0.1).momentum(0.9).weight_decay(1e-3);
  std::vector<at::Tensor> ours = Params();
  FusedSgd fused(ours, options);
  for (int t = 0; t < 2; ++t) Step(fused, ours, t);
  std::stringstream saved;
  {
    torch::serialize::OutputArchive archive;
    fused.save(archive);
    archive.save_to(saved);
  }
  std::vector<at::Tensor> theirs = Clones(ours);
  torch::optim::SGD reference(theirs, options);
  {
    torch::serialize::InputArchive archive;
    archive.load_from(saved);
    reference.load(archive);
  }
  for (int t = 2; t < 4; ++t) {
    Step(fused, ours, t);
    Step(reference, theirs, t);
  }
  ExpectClose(ours, theirs);
}

}  // namespace
}  // namespace baton::trainer
