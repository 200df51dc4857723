#include "worker/trainer/optim/optimizer.h"

#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/torch.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/testing/python_runner.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

// Runs `options` on a float64 parameter starting at `p0`, one step per gradient (the
// same gradient for every element), and returns the parameter.
std::vector<double> RunSteps(const OptimizerOptions& options, const std::vector<double>& p0,
                             const std::vector<std::vector<double>>& grads,
                             const std::vector<double>& lrs = {}) {
  at::Tensor p = torch::tensor(p0, torch::kFloat64).requires_grad_(true);
  absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> opt = MakeOptimizer({p}, options);
  EXPECT_OK(opt);
  if (!opt.ok()) return {};
  for (size_t t = 0; t < grads.size(); ++t) {
    if (t < lrs.size()) SetLearningRate(**opt, lrs[t]);
    p.mutable_grad() = torch::tensor(grads[t], torch::kFloat64);
    (*opt)->step();
  }
  at::Tensor c = p.detach().contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

OptimizerOptions Sgd(double lr, double momentum, bool nesterov, double weight_decay) {
  OptimizerOptions o;
  o.name = "sgd";
  o.lr = lr;
  o.momentum = momentum;
  o.nesterov = nesterov;
  o.weight_decay = weight_decay;
  return o;
}

OptimizerOptions AdamW(double lr, double weight_decay) {
  OptimizerOptions o;
  o.name = "adamw";
  o.lr = lr;
  o.weight_decay = weight_decay;
  return o;
}

// Hand-computed (p0 = 1, gradients 1 then 2):
//   SGD lr .1 m .9 wd .01:  d1 = 1.01, buf = 1.01, p = .899;
//                           d2 = 2 + .00899, buf = .909 + 2.00899, p = .899 - .291799.
//   Nesterov:               p1 = 1 - .1 (1.01 + .9 * 1.01) = .8081; d2 = 2.008081,
//                           buf = 2.917081, p2 = .8081 - .1 (2.008081 + .9 buf).
//   AdamW lr .1 wd .1:      p1 = .99 - (.1 / .1) * .1 / (1 + 1e-8) = .890000001; p2 from
//                           m = .29, v = .004999, bias corrections .19 and .001999.
TEST(OptimizerTest, HandComputedSteps) {
  EXPECT_NEAR(RunSteps(Sgd(0.1, 0, false, 0), {1.0}, {{1.0}, {2.0}})[0], 0.7, 1e-15);
  EXPECT_NEAR(RunSteps(Sgd(0.1, 0.9, false, 0.01), {1.0}, {{1.0}, {2.0}})[0], 0.607201, 1e-15);
  EXPECT_NEAR(RunSteps(Sgd(0.1, 0.9, true, 0.01), {1.0}, {{1.0}, {2.0}})[0], 0.34475461, 1e-15);
  EXPECT_NEAR(RunSteps(AdamW(0.1, 0.1), {1.0}, {{1.0}})[0], 0.890000001, 1e-15);
  EXPECT_NEAR(RunSteps(AdamW(0.1, 0.1), {1.0}, {{1.0}, {2.0}})[0], 0.78458179901816625, 1e-15);
}

TEST(OptimizerTest, AdamWDefaultsMatchTheSpec) {
  // beta1 .9, beta2 .999, eps 1e-8 and, unlike LibTorch's AdamWOptions, weight decay 0.
  at::Tensor p = torch::zeros({1}, torch::kFloat64).requires_grad_(true);
  OptimizerOptions o;
  o.name = "adamw";
  auto opt = MakeOptimizer({p}, o);
  ASSERT_OK(opt);
  auto* adamw = dynamic_cast<torch::optim::AdamW*>(opt->get());
  ASSERT_NE(adamw, nullptr);
  const auto& options =
      static_cast<const torch::optim::AdamWOptions&>(adamw->param_groups()[0].options());
  EXPECT_EQ(std::get<0>(options.betas()), 0.9);
  EXPECT_EQ(std::get<1>(options.betas()), 0.999);
  EXPECT_EQ(options.eps(), 1e-8);
  EXPECT_EQ(options.weight_decay(), 0.0);
  EXPECT_FALSE(options.amsgrad());
}

TEST(OptimizerTest, LearningRateIsSettable) {
  at::Tensor p = torch::ones({2}).requires_grad_(true);
  auto opt = MakeOptimizer({p}, Sgd(0.05, 0.9, false, 0));
  ASSERT_OK(opt);
  EXPECT_EQ(GetLearningRate(**opt), 0.05);
  SetLearningRate(**opt, 0.125);
  EXPECT_EQ(GetLearningRate(**opt), 0.125);
  // Plain SGD with lr .125 on grad 1: p = 1 - .125.
  p.mutable_grad() = torch::ones({2});
  (*opt)->step();
  EXPECT_EQ(p[0].item<float>(), 0.875f);
}

TEST(OptimizerTest, RejectsBadOptions) {
  using absl::StatusCode;
  auto make = [](OptimizerOptions o) {
    return MakeOptimizer({torch::ones({1}).requires_grad_(true)}, o).status();
  };
  OptimizerOptions o;
  o.name = "lamb";
  EXPECT_THAT(make(o), StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.optimizer")));
  EXPECT_THAT(make(Sgd(0, 0.9, false, 0)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.lr")));
  EXPECT_THAT(make(Sgd(0.1, 1.0, false, 0)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.momentum")));
  EXPECT_THAT(make(Sgd(0.1, 0, true, 0)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.nesterov")));
  EXPECT_THAT(make(Sgd(0.1, 0.9, false, -1)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.weight_decay")));
  o = AdamW(0.1, 0);
  o.adam_beta2 = 1.0;
  EXPECT_THAT(make(o), StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.adam_beta2")));
  o = AdamW(0.1, 0);
  o.adam_eps = -1;
  EXPECT_THAT(make(o), StatusIs(StatusCode::kInvalidArgument, HasSubstr("trainer.adam_eps")));
  EXPECT_THAT(MakeOptimizer({}, Sgd(0.1, 0.9, false, 0)).status(),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("no parameters")));
  o.name = "";  // Defaults to SGD.
  o.adam_eps = 1e-8;
  EXPECT_OK(make(o));
}

// ---- the same steps in PyTorch (Debian's python3-torch at /usr/bin/python3) ----------

std::string PyList(const std::vector<double>& v) {
  return absl::StrCat("[",
                      absl::StrJoin(v, ",",
                                    [](std::string* out, double x) {
                                      absl::StrAppend(out, absl::StrFormat("%.17g", x));
                                    }),
                      "]");
}

// Runs each optimizer expression (over a parameter `p`) in one Python process, with the
// same per-step lrs and gradients as RunSteps; one parameter vector per expression.
std::vector<std::vector<double>> RunInPyTorch(const std::vector<std::string>& make_optimizers,
                                              const std::vector<double>& p0,
                                              const std::vector<std::vector<double>>& grads,
                                              const std::vector<double>& lrs) {
  std::vector<std::string> grad_lists;
  for (const auto& g : grads) grad_lists.push_back(PyList(g));
  std::string script =
      absl::StrCat("import torch\n", "def run(make):\n", "    p = torch.tensor(", PyList(p0),
                   ", dtype=torch.float64, requires_grad=True)\n", "    opt = make(p)\n",
                   "    for lr, g in zip(", PyList(lrs), ", [", absl::StrJoin(grad_lists, ","),
                   "]):\n", "        for group in opt.param_groups: group['lr'] = lr\n",
                   "        p.grad = torch.tensor(g, dtype=torch.float64)\n",
                   "        opt.step()\n", "    print(' '.join(repr(x) for x in p.tolist()))\n");
  for (const std::string& make : make_optimizers) {
    absl::StrAppend(&script, "run(lambda p: ", make, ")\n");
  }
  absl::StatusOr<std::string> out = testing::RunPython3(script, ::testing::TempDir());
  EXPECT_OK(out);
  if (!out.ok()) return {};
  std::vector<std::vector<double>> results;
  for (absl::string_view line : absl::StrSplit(*out, '\n', absl::SkipEmpty())) {
    std::vector<double>& values = results.emplace_back();
    for (absl::string_view token : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      double x;
      EXPECT_TRUE(absl::SimpleAtod(token, &x)) << "unexpected python output:\n" << *out;
      values.push_back(x);
    }
  }
  return results;
}

TEST(OptimizerTest, MatchesPyTorch) {
  const std::vector<double> p0 = {1.0, -0.5, 0.25, 2.0, -3.0};
  std::vector<std::vector<double>> grads;
  std::vector<double> lrs;
  for (int t = 0; t < 6; ++t) {
    std::vector<double> g;
    for (int i = 0; i < 5; ++i) g.push_back(((t * 7 + i * 3) % 11 - 5) * 0.1 + 0.01 * t);
    grads.push_back(g);
    lrs.push_back(0.05 * (t + 1) / 6);  // A changing (warmup-like) lr.
  }
  OptimizerOptions adamw = AdamW(0.05, 0.05);
  adamw.adam_beta1 = 0.8;
  adamw.adam_beta2 = 0.95;
  adamw.adam_eps = 1e-6;
  const std::vector<std::pair<OptimizerOptions, std::string>> cases = {
      {Sgd(0.05, 0, false, 0), "torch.optim.SGD([p], lr=0.05)"},
      {Sgd(0.05, 0.9, false, 1e-2),
       "torch.optim.SGD([p], lr=0.05, momentum=0.9, weight_decay=1e-2)"},
      {Sgd(0.05, 0.9, true, 1e-2),
       "torch.optim.SGD([p], lr=0.05, momentum=0.9, weight_decay=1e-2, nesterov=True)"},
      {AdamW(0.05, 0.0), "torch.optim.AdamW([p], lr=0.05, weight_decay=0.0)"},
      {adamw, "torch.optim.AdamW([p], lr=0.05, betas=(0.8, 0.95), eps=1e-6, weight_decay=0.05)"},
  };
  std::vector<std::string> python;
  for (const auto& c : cases) python.push_back(c.second);
  const std::vector<std::vector<double>> theirs = RunInPyTorch(python, p0, grads, lrs);
  ASSERT_EQ(theirs.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(cases[k].second);
    const std::vector<double> ours = RunSteps(cases[k].first, p0, grads, lrs);
    ASSERT_EQ(ours.size(), theirs[k].size());
    for (size_t i = 0; i < ours.size(); ++i) EXPECT_NEAR(ours[i], theirs[k][i], 1e-14) << i;
  }
}

}  // namespace
}  // namespace baton::trainer
