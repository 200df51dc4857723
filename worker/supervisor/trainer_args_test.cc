#include "worker/supervisor/trainer_args.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <variant>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/spec/trainer_spec.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

using ::baton::TrainerSpecLeaf;
using ::baton::TrainerSpecLeaves;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The flag of `field` in `argv` ("--<field>=..."), or "" when absent; fails the test when
// it appears more than once.
std::string FlagOf(const std::vector<std::string>& argv, absl::string_view field) {
  const std::string prefix = absl::StrCat("--", field, "=");
  std::string found;
  for (const std::string& arg : argv) {
    if (!absl::StartsWith(arg, prefix)) continue;
    EXPECT_TRUE(found.empty()) << field << " passed twice";
    found = arg;
  }
  return found;
}

// A TrainerSpec field the worker does not pass fails here: the trainer's own flag default
// would silently apply to the job.
TEST(TrainerArgvTest, PassesEveryTrainerSpecFieldExplicitly) {
  const std::vector<std::string> argv =
      TrainerArgv("t", baton::v1::TrainerSpec(), baton::v1::Budget(), "");
  const std::vector<TrainerSpecLeaf> leaves = TrainerSpecLeaves();
  for (const TrainerSpecLeaf& leaf : leaves) {
    EXPECT_NE(FlagOf(argv, leaf.flag_name), "") << leaf.spec_path << " is not passed";
  }
  EXPECT_EQ(FlagOf(argv, "zero_stage"), "--zero_stage=0");
  EXPECT_EQ(FlagOf(argv, "zero_offload_optimizer"), "--zero_offload_optimizer=false");
  EXPECT_EQ(FlagOf(argv, "max_steps"), "--max_steps=0");
  EXPECT_EQ(FlagOf(argv, "max_epochs"), "--max_epochs=0");
  EXPECT_EQ(FlagOf(argv, "checkpoint_dir"), "--checkpoint_dir=");
  EXPECT_EQ(argv.size(), 1u + leaves.size() + 3u);
  EXPECT_EQ(argv[0], "t");
}

// An unset field gets the table's default (as at submit), not baton-trainer's; a required
// one (model, dataset) is passed empty, for the trainer to reject.
TEST(TrainerArgvTest, UnsetFieldsGetTheTablesDefault) {
  namespace ts = ::baton::trainer_spec;
  const std::vector<std::string> argv =
      TrainerArgv("t", baton::v1::TrainerSpec(), baton::v1::Budget(), "");
  for (const ts::AnyField& field : ts::TrainerSpecFields()) {
    const bool required = std::holds_alternative<const ts::ChoiceField*>(field) &&
                          std::get<const ts::ChoiceField*>(field)->required;
    EXPECT_EQ(FlagOf(argv, ts::FieldName(field)),
              absl::StrCat("--", ts::FieldName(field), "=",
                           required ? "" : ts::DefaultText(field)));
  }
  EXPECT_EQ(FlagOf(argv, "keep_checkpoints"), "--keep_checkpoints=3");
  EXPECT_EQ(FlagOf(argv, "hidden"), "--hidden=256,128");
  EXPECT_EQ(FlagOf(argv, "lr"), "--lr=0.05");
  EXPECT_EQ(FlagOf(argv, "model"), "--model=");
}

TEST(TrainerArgvTest, SetFieldsAreKept) {
  baton::v1::TrainerSpec t;
  t.set_model("mlp");
  t.set_dataset("mnist");
  t.set_data_dir("/data/mnist");
  t.set_batch_size(32);
  t.set_momentum(0);  // Present: plain SGD must reach the trainer.
  t.set_seed(7);
  t.add_hidden(256);
  t.add_hidden(128);
  t.add_hidden(64);
  t.set_nesterov(true);
  t.set_adam_eps(0);
  t.set_lr_gamma(0);
  t.set_keep_checkpoints(5);
  t.set_global_batch(512);
  t.set_sample_log("/tmp/samples");
  t.set_activation_checkpointing("blocks");
  t.mutable_zero()->set_stage(1);
  baton::v1::Budget b;
  b.set_max_steps(1000);
  b.set_max_epochs(3);
  const std::vector<std::string> argv = TrainerArgv("/bin/baton-trainer", t, b, "/ckpt");
  EXPECT_EQ(argv[0], "/bin/baton-trainer");
  EXPECT_THAT(std::vector<std::string>(argv.begin() + 1, argv.begin() + 9),
              ElementsAre("--model=mlp", "--dataset=mnist", "--data_dir=/data/mnist",
                          "--batch_size=32", "--lr=0.05", "--momentum=0", "--seed=7",
                          "--hidden=256,128,64"));
  EXPECT_EQ(FlagOf(argv, "nesterov"), "--nesterov=true");
  EXPECT_EQ(FlagOf(argv, "adam_eps"), "--adam_eps=0");
  EXPECT_EQ(FlagOf(argv, "lr_gamma"), "--lr_gamma=0");
  EXPECT_EQ(FlagOf(argv, "keep_checkpoints"), "--keep_checkpoints=5");
  EXPECT_EQ(FlagOf(argv, "global_batch"), "--global_batch=512");
  EXPECT_EQ(FlagOf(argv, "sample_log"), "--sample_log=/tmp/samples");
  EXPECT_EQ(FlagOf(argv, "activation_checkpointing"), "--activation_checkpointing=blocks");
  EXPECT_EQ(FlagOf(argv, "zero_stage"), "--zero_stage=1");
  EXPECT_THAT(std::vector<std::string>(argv.end() - 3, argv.end()),
              ElementsAre("--max_steps=1000", "--max_epochs=3", "--checkpoint_dir=/ckpt"));
}

TEST(TrainerArgvTest, DoublesRoundTrip) {
  baton::v1::TrainerSpec t;
  t.set_lr(0.1 + 0.2);  // 0.30000000000000004
  const std::string lr = FlagOf(TrainerArgv("t", t, baton::v1::Budget(), ""), "lr");
  ASSERT_FALSE(lr.empty());
  EXPECT_EQ(std::stod(lr.substr(5)), 0.1 + 0.2);
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
