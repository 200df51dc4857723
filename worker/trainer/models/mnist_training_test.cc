// The MNIST path end to end, as the training loop drives it: synthetic MNIST IDX files ->
// OpenDataset -> Loader (threads, prefetch) -> MLP -> SGD; the loss falls and the t10k
// split is classified well.

#include <ATen/ATen.h>
#include <torch/optim/sgd.h>

#include <cstdlib>
#include <numeric>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/data/loader/distributed_sampler.h"
#include "worker/trainer/data/loader/loader.h"
#include "worker/trainer/data/synthetic_mnist.h"
#include "worker/trainer/models/model.h"

namespace baton::trainer {
namespace {

TEST(MnistTrainingTest, MlpLearnsThroughTheLoader) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string dir = std::string(tmp != nullptr ? tmp : "/tmp") + "/mnist";
  ASSERT_OK(WriteSyntheticMnistDir(dir, /*train_size=*/3000, /*test_size=*/500, /*seed=*/1));
  const DataOptions data_options{.dataset = "mnist", .data_dir = dir};
  absl::StatusOr<std::unique_ptr<Dataset>> train = OpenDataset(data_options, Split::kTrain);
  absl::StatusOr<std::unique_ptr<Dataset>> test = OpenDataset(data_options, Split::kTest);
  ASSERT_OK(train);
  ASSERT_OK(test);
  ASSERT_NE(*test, nullptr);

  absl::StatusOr<std::unique_ptr<Model>> model =
      MakeModel({.model = "mlp", .hidden = {128}, .seed = 1}, (*train)->info());
  ASSERT_OK(model);
  Model& m = **model;
  torch::optim::SGD opt(m.Parameters(), torch::optim::SGDOptions(0.05).momentum(0.9));

  absl::StatusOr<DistributedSampler> sampler =
      DistributedSampler::Create((*train)->size(), /*rank=*/0, /*world_size=*/1, 64, 1);
  ASSERT_OK(sampler);
  absl::StatusOr<std::unique_ptr<Loader>> loader =
      Loader::Create(train->get(), *sampler, {.threads = 2, .prefetch_batches = 4, .seed = 1});
  ASSERT_OK(loader);

  std::vector<double> losses;
  int64_t correct = 0;
  int64_t seen = 0;
  while (losses.size() < 200) {
    absl::StatusOr<std::optional<Batch>> batch = (*loader)->Next();
    ASSERT_OK(batch);
    if (!batch->has_value()) continue;  // End of an epoch (46 batches each).
    opt.zero_grad();
    const StepOutput out = m.Forward(**batch);
    out.loss.backward();
    opt.step();
    losses.push_back(out.loss.item<double>());
    if (losses.size() > 150) {
      correct += out.correct.item<int64_t>();
      seen += out.count;
    }
  }
  const double first = std::accumulate(losses.begin(), losses.begin() + 10, 0.0) / 10;
  const double last = std::accumulate(losses.end() - 10, losses.end(), 0.0) / 10;
  EXPECT_LT(last, 0.3 * first) << first << " -> " << last;
  EXPECT_GT(static_cast<double>(correct) / seen, 0.85);
  EXPECT_EQ((*loader)->position().epoch, 4);

  m.Train(false);
  at::NoGradGuard no_grad;
  std::vector<int64_t> all((*test)->size());
  std::iota(all.begin(), all.end(), 0);
  absl::StatusOr<Batch> test_batch = (*test)->Get(all, 0);
  ASSERT_OK(test_batch);
  const StepOutput eval = m.Forward(*test_batch);
  EXPECT_GT(static_cast<double>(eval.correct.item<int64_t>()) / eval.count, 0.85);
}

}  // namespace
}  // namespace baton::trainer
