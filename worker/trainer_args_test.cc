#include "worker/trainer_args.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(TrainerArgvTest, EverySetFieldBecomesAFlag) {
  baton::v1::TrainerSpec t;
  t.set_model("mlp");
  t.set_dataset("mnist");
  t.set_data_dir("/data/mnist");
  t.set_batch_size(32);
  t.set_lr(0.05);
  t.set_momentum(0.9);
  t.set_seed(7);
  t.add_hidden(256);
  t.add_hidden(128);
  t.add_hidden(64);
  t.set_log_every(10);
  t.set_threads(2);
  baton::v1::Budget b;
  b.set_max_steps(1000);
  b.set_max_epochs(3);
  EXPECT_THAT(
      TrainerArgv("/bin/baton-trainer", t, b, "/ckpt"),
      ElementsAre("/bin/baton-trainer", "--model=mlp", "--dataset=mnist", "--data_dir=/data/mnist",
                  "--batch_size=32", "--lr=0.05", "--momentum=0.9", "--seed=7",
                  "--hidden=256,128,64", "--log_every=10", "--threads=2", "--max_steps=1000",
                  "--max_epochs=3", "--checkpoint_dir=/ckpt"));
}

TEST(TrainerArgvTest, UnsetFieldsAreLeftToTheTrainersDefaults) {
  EXPECT_THAT(TrainerArgv("t", baton::v1::TrainerSpec(), baton::v1::Budget(), ""),
              ElementsAre("t"));
  baton::v1::TrainerSpec t;
  t.set_lr(1e-4);
  t.set_momentum(0);  // Present: plain SGD must reach the trainer.
  baton::v1::Budget b;
  b.set_max_epochs(1);
  EXPECT_THAT(TrainerArgv("t", t, b, "/c"), ElementsAre("t", "--lr=0.0001", "--momentum=0",
                                                        "--max_epochs=1", "--checkpoint_dir=/c"));
}

TEST(TrainerArgvTest, DoublesRoundTrip) {
  baton::v1::TrainerSpec t;
  t.set_lr(0.1 + 0.2);  // 0.30000000000000004
  const std::vector<std::string> argv = TrainerArgv("t", t, baton::v1::Budget(), "");
  ASSERT_EQ(argv.size(), 2u);
  EXPECT_EQ(std::stod(argv[1].substr(5)), 0.1 + 0.2);
}

class ResolveTrainerPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* tmp = std::getenv("TEST_TMPDIR");
    dir_ = std::string(tmp ? tmp : "/tmp") + "/resolve";
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ + "/bin/trainer");
    std::filesystem::create_directories(dir_ + "/path");
  }
  void MakeExecutable(const std::string& path) {
    std::ofstream(path) << "#!/bin/sh\n";
    ::chmod(path.c_str(), 0755);
  }
  std::string dir_;
};

TEST_F(ResolveTrainerPathTest, FlagWins) {
  MakeExecutable(dir_ + "/bin/baton-trainer");
  absl::StatusOr<std::string> path = ResolveTrainerPath("/opt/t", dir_ + "/bin/baton-worker", "");
  ASSERT_OK(path);
  EXPECT_EQ(*path, "/opt/t");
}

TEST_F(ResolveTrainerPathTest, SearchOrder) {
  const std::string self = dir_ + "/bin/baton-worker";
  EXPECT_THAT(ResolveTrainerPath("", self, dir_ + "/path"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("--trainer")));
  MakeExecutable(dir_ + "/path/baton-trainer");
  EXPECT_EQ(*ResolveTrainerPath("", self, dir_ + "/path"), dir_ + "/path/baton-trainer");
  MakeExecutable(dir_ + "/bin/trainer/baton-trainer");
  EXPECT_EQ(*ResolveTrainerPath("", self, dir_ + "/path"), dir_ + "/bin/trainer/baton-trainer");
  MakeExecutable(dir_ + "/bin/baton-trainer");
  EXPECT_EQ(*ResolveTrainerPath("", self, dir_ + "/path"), dir_ + "/bin/baton-trainer");
}

}  // namespace
}  // namespace baton::worker
