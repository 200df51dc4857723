#include "worker/trainer/snapshot/snapshot_checkpointer.h"

#include <ATen/Functions.h>
#include <torch/optim/sgd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/checkpoint/checkpoint_codec.h"
#include "worker/trainer/checkpoint/checkpoint_manager.h"
#include "worker/trainer/snapshot/snapshot_codec.h"

namespace baton::trainer {
namespace {

using ::baton::StatusIs;
using ::testing::HasSubstr;

std::string FreshDir(const std::string& name) {
  const std::string dir = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  std::filesystem::remove_all(dir);
  return dir;
}

CheckpointManager Manager(const std::string& dir, int64_t generation) {
  CheckpointManagerOptions options;
  options.dir = dir;
  options.checkpoint_every = 10;
  options.keep = 2;
  options.generation = generation;
  options.job = "job-1";
  return CheckpointManager::Create(options).value();
}

// A parameter, a buffer and SGD with momentum after a step, at `step`.
struct Fixture {
  at::Tensor w = at::randn({4, 3}).set_requires_grad(true);
  at::Tensor count = at::arange(3, at::kLong);
  torch::optim::SGD sgd{std::vector<at::Tensor>{w}, torch::optim::SGDOptions(0.1).momentum(0.9)};

  Fixture() {
    sgd.zero_grad();
    (w * w).sum().backward();
    sgd.step();
  }

  TrainingState State(int64_t step) {
    TrainingState s;
    s.progress.step = step;
    s.progress.epoch = 1;
    s.progress.batch_in_epoch = 4;
    s.progress.world_size = 2;
    s.tensors = {{"w", w}, {"count", count}};
    s.optimizer = &sgd;
    return s;
  }

  std::string Snapshot(int64_t step) {
    const SnapshotImage image = SnapshotImage::Plan(State(step)).value();
    std::string bytes(image.size(), '\0');
    image.WriteTo(bytes.data());
    return bytes;
  }
};

// The checkpoint written from a snapshot is the file a synchronous save of the same state
// writes (decoded: same progress, tensors, optimizer state and RNG), where a save puts it.
TEST(SnapshotCheckpointer, WritesTheCheckpointOfTheSnapshotsStep) {
  const std::string dir = FreshDir("writes");
  Fixture f;
  const std::string bytes = f.Snapshot(20);
  const TrainingState state = f.State(20);
  const DecodedCheckpoint expected = DecodeCheckpoint(*EncodeTrainingState(state)).value();
  CheckpointManager manager = Manager(dir, 1);
  ASSERT_OK(manager.RecordStart(0));
  SnapshotCheckpointer checkpointer(manager);
  ASSERT_OK(checkpointer.Start(bytes));
  ASSERT_OK(checkpointer.Wait());
  ASSERT_TRUE(checkpointer.last_saved().has_value());
  EXPECT_EQ(checkpointer.last_saved()->step, 20);
  EXPECT_EQ(checkpointer.last_saved()->path, manager.PathForStep(20));
  ASSERT_OK_AND_ASSIGN(const DecodedCheckpoint read, ReadCheckpointFile(manager.PathForStep(20)));
  EXPECT_EQ(read.progress.step, 20);
  EXPECT_EQ(read.progress.batch_in_epoch, 4);
  EXPECT_EQ(read.model_order, expected.model_order);
  EXPECT_TRUE(read.model.at("w").equal(expected.model.at("w")));
  EXPECT_TRUE(read.model.at("count").equal(expected.model.at("count")));
  EXPECT_TRUE(read.optimizer_state[0]
                  .at("momentum_buffer")
                  .equal(expected.optimizer_state[0].at("momentum_buffer")));
  EXPECT_TRUE(read.rng_cpu.equal(expected.rng_cpu));
  // Pruned like any save: keep = 2.
  for (int64_t step : {30, 40}) {
    ASSERT_OK(checkpointer.Start(f.Snapshot(step)));
  }
  ASSERT_OK(checkpointer.Wait());
  EXPECT_FALSE(std::filesystem::exists(manager.PathForStep(20)));
  EXPECT_TRUE(std::filesystem::exists(manager.PathForStep(40)));
}

// A damaged snapshot writes nothing; the error comes back from the next call.
TEST(SnapshotCheckpointer, ReportsAFailedSaveOnceAndStartsNothingAfterIt) {
  const std::string dir = FreshDir("damaged");
  Fixture f;
  std::string bytes = f.Snapshot(10);
  bytes.resize(bytes.size() / 2);
  SnapshotCheckpointer checkpointer(Manager(dir, 1));
  ASSERT_OK(checkpointer.Start(bytes));
  // Start reports the failed save and does not start the next one.
  EXPECT_THAT(checkpointer.Start(f.Snapshot(20)),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("in-memory snapshot")));
  ASSERT_OK(checkpointer.Wait());
  EXPECT_FALSE(std::filesystem::exists(dir + "/ckpt-g1-00000010.pt"));
  EXPECT_FALSE(checkpointer.last_saved().has_value());
}

// A newer generation started in the directory: the save is refused as a synchronous one
// is (FAILED_PRECONDITION: the caller stops training), reported by Wait.
TEST(SnapshotCheckpointer, ASupersededGenerationIsRefused) {
  const std::string dir = FreshDir("superseded");
  Fixture f;
  SnapshotCheckpointer checkpointer(Manager(dir, 1));
  ASSERT_OK(Manager(dir, 2).RecordStart(0));
  ASSERT_OK(checkpointer.Start(f.Snapshot(10)));
  EXPECT_THAT(checkpointer.Wait(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("generation 2")));
  EXPECT_OK(checkpointer.Poll());  // Reported once.
}

}  // namespace
}  // namespace baton::trainer
