#include <ATen/ATen.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/models/model.h"

namespace baton::trainer {
namespace {

using ::testing::_;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// testing/tiny_mlp.py (a data dependency) writes mlp.pt, lm.pt and names.txt into this directory.
std::string ModelDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return std::string(tmp != nullptr ? tmp : "/tmp") + "/torchscript";
}

class TorchScriptModelTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string command = absl::StrCat(
        "/usr/bin/python3 worker/trainer/models/testing/tiny_mlp.py '", ModelDir(), "'");
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }

  static std::unique_ptr<Dataset> Open(const DataOptions& o) {
    absl::StatusOr<std::unique_ptr<Dataset>> d = OpenDataset(o, Split::kTrain);
    EXPECT_OK(d);
    return d.ok() ? *std::move(d) : nullptr;
  }

  // Mean loss of the first and the last 5 of `steps` optimizer steps on batches of 32.
  static std::pair<double, double> Train(Model& model, const Dataset& data,
                                         torch::optim::Optimizer& opt, int steps) {
    std::vector<double> losses;
    for (int step = 0; step < steps; ++step) {
      std::vector<int64_t> indices;
      for (int i = 0; i < 32; ++i) indices.push_back((step * 32 + i) % data.size());
      absl::StatusOr<Batch> batch = data.Get(indices, step);
      EXPECT_OK(batch);
      opt.zero_grad();
      const StepOutput out = model.Forward(*batch);
      out.loss.backward();
      opt.step();
      losses.push_back(out.loss.item<double>());
    }
    double first = 0;
    double last = 0;
    for (int i = 0; i < 5; ++i) {
      first += losses[i] / 5;
      last += losses[steps - 1 - i] / 5;
    }
    return {first, last};
  }
};

TEST_F(TorchScriptModelTest, ClassifierScriptedInPythonTrainsInCpp) {
  std::unique_ptr<Dataset> data =
      Open({.dataset = "synthetic", .image_size = 8, .synthetic_samples = 512, .num_classes = 4});
  absl::StatusOr<std::unique_ptr<Model>> model =
      MakeModel({.model = "torchscript", .torchscript_path = ModelDir() + "/mlp.pt"}, data->info());
  ASSERT_OK(model);
  Model& m = **model;
  std::vector<std::string> names;
  for (const auto& [name, tensor] : m.NamedParameters()) names.push_back(name);
  // The names Python's state_dict() uses (names.txt), parameters only.
  EXPECT_THAT(names, ElementsAre("body.1.weight", "body.1.bias", "head.weight", "head.bias"));
  EXPECT_THAT(m.NamedBuffers(), ElementsAre(Pair("calls", _)));
  ASSERT_EQ(m.Parameters().size(), 4u);
  EXPECT_TRUE(m.Parameters()[0].is_same(m.NamedParameters()[0].second));

  torch::optim::SGD opt(m.Parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));
  const auto [first, last] = Train(m, *data, opt, 60);
  EXPECT_LT(last, 0.5 * first) << "loss " << first << " -> " << last;
  const StepOutput out = m.Forward(*data->Get(std::vector<int64_t>{0, 1, 2, 3}, 0));
  EXPECT_EQ(out.count, 4);
  EXPECT_EQ(out.correct.scalar_type(), at::kLong);
}

TEST_F(TorchScriptModelTest, LanguageModelScriptedInPythonTrainsInCpp) {
  std::unique_ptr<Dataset> data = Open({.dataset = "synthetic",
                                        .context_length = 8,
                                        .synthetic_samples = 512,
                                        .vocab_size = 32,
                                        .synthetic_tokens = true});
  absl::StatusOr<std::unique_ptr<Model>> model = MakeModel(
      {.model = "torchscript", .torchscript_path = ModelDir() + "/lm.pt", .task = "language_model"},
      data->info());
  ASSERT_OK(model);
  torch::optim::Adam opt((*model)->Parameters(), torch::optim::AdamOptions(1e-2));
  const auto [first, last] = Train(**model, *data, opt, 80);
  EXPECT_LT(last, first - 0.5) << "loss " << first << " -> " << last;
  const StepOutput out = (*model)->Forward(*data->Get(std::vector<int64_t>{0, 1}, 0));
  EXPECT_EQ(out.count, 16);
}

TEST_F(TorchScriptModelTest, BadModulesGiveClearStatuses) {
  std::unique_ptr<Dataset> images =
      Open({.dataset = "synthetic", .image_size = 8, .synthetic_samples = 8, .num_classes = 4});
  std::unique_ptr<Dataset> tokens = Open({.dataset = "synthetic",
                                          .context_length = 8,
                                          .synthetic_samples = 8,
                                          .vocab_size = 32,
                                          .synthetic_tokens = true});
  EXPECT_THAT(MakeModel({.model = "torchscript", .torchscript_path = ModelDir() + "/none.pt"},
                        images->info()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none.pt")));
  const std::string garbage = ModelDir() + "/garbage.pt";
  std::ofstream(garbage) << "not a zip archive";
  EXPECT_THAT(MakeModel({.model = "torchscript", .torchscript_path = garbage}, images->info()),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("garbage.pt"), HasSubstr("TorchScript"))));
  EXPECT_THAT(MakeModel({.model = "torchscript"}, images->info()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("torchscript_path")));
  // The classifier fed tokens fails its dry run.
  EXPECT_THAT(MakeModel({.model = "torchscript",
                         .torchscript_path = ModelDir() + "/mlp.pt",
                         .task = "language_model"},
                        tokens->info()),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("mlp.pt"), HasSubstr("forward() on a [2, 8] int64 input"))));
  // Four logits for ten classes.
  std::unique_ptr<Dataset> ten =
      Open({.dataset = "synthetic", .image_size = 8, .synthetic_samples = 8, .num_classes = 10});
  EXPECT_THAT(
      MakeModel({.model = "torchscript", .torchscript_path = ModelDir() + "/mlp.pt"}, ten->info()),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("[batch, classes] = [2, >= 10]"), HasSubstr("got [2, 4]"))));
  EXPECT_THAT(MakeModel({.model = "torchscript", .torchscript_path = ModelDir() + "/lm.pt"},
                        tokens->info()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("task")));
  EXPECT_THAT(
      MakeModel(
          {.model = "torchscript", .torchscript_path = ModelDir() + "/lm.pt", .task = "regression"},
          tokens->info()),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("regression")));
}

}  // namespace
}  // namespace baton::trainer
