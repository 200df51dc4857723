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

TEST(TrainerArgvTest, EveryNewFieldBecomesAFlagOfTheSameName) {
  baton::v1::TrainerSpec t;
  t.set_precision("fp16");
  t.set_accumulation_steps(4);
  t.set_bucket_cap_mb(12.5);
  t.set_grad_compression("bf16");
  t.set_max_grad_norm(1.0);
  t.set_optimizer("adamw");
  t.set_weight_decay(0.01);
  t.set_nesterov(true);
  t.set_adam_beta1(0.8);
  t.set_adam_beta2(0.95);
  t.set_adam_eps(1e-6);
  t.set_lr_schedule("cosine");
  t.set_warmup_steps(100);
  t.set_lr_step_size(30);
  t.set_lr_gamma(0.5);
  t.set_min_lr(1e-5);
  t.set_base_batch(256);
  t.set_loader_threads(3);
  t.set_prefetch_batches(8);
  t.set_image_size(160);
  t.set_context_length(256);
  t.set_synthetic_samples(1000);
  t.set_num_classes(100);
  t.set_gpt_layers(6);
  t.set_gpt_heads(8);
  t.set_gpt_width(512);
  t.set_vocab_size(32000);
  t.set_torchscript_path("/m/model.pt");
  t.set_task("language_model");
  t.set_checkpoint_every(500);
  t.set_keep_checkpoints(5);
  t.set_global_batch(512);
  EXPECT_THAT(
      TrainerArgv("t", t, baton::v1::Budget(), ""),
      ElementsAre("t", "--precision=fp16", "--accumulation_steps=4", "--bucket_cap_mb=12.5",
                  "--grad_compression=bf16", "--max_grad_norm=1", "--optimizer=adamw",
                  "--weight_decay=0.01", "--nesterov=true", "--adam_beta1=0.8",
                  "--adam_beta2=0.95", "--adam_eps=1e-06", "--lr_schedule=cosine",
                  "--warmup_steps=100", "--lr_step_size=30", "--lr_gamma=0.5", "--min_lr=1e-05",
                  "--base_batch=256", "--loader_threads=3", "--prefetch_batches=8",
                  "--image_size=160", "--context_length=256", "--synthetic_samples=1000",
                  "--num_classes=100", "--gpt_layers=6", "--gpt_heads=8", "--gpt_width=512",
                  "--vocab_size=32000", "--torchscript_path=/m/model.pt",
                  "--task=language_model", "--checkpoint_every=500", "--keep_checkpoints=5",
                  "--global_batch=512"));
}

TEST(TrainerArgvTest, FieldsWithPresencePassAnExplicitZero) {
  baton::v1::TrainerSpec t;
  t.set_adam_beta1(0);
  t.set_adam_beta2(0);
  t.set_adam_eps(0);
  t.set_lr_gamma(0);
  t.set_nesterov(false);  // A plain bool: false is the default and is not passed.
  EXPECT_THAT(TrainerArgv("t", t, baton::v1::Budget(), ""),
              ElementsAre("t", "--adam_beta1=0", "--adam_beta2=0", "--adam_eps=0",
                          "--lr_gamma=0"));
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
