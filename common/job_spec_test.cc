#include "common/job_spec.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

using baton::v1::JobSpec;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

// A fresh directory under the test's temp dir.
std::string MakeTempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/job_spec_test_", getpid(),
                                 "_", name);
  mkdir(dir.c_str(), 0755);
  return dir;
}

void Touch(const std::string& path) { std::ofstream(path) << "x"; }

// A directory holding the (fake) MNIST files.
const std::string& MnistDir() {
  static const std::string* dir = [] {
    auto* d = new std::string(MakeTempDir("mnist"));
    Touch(*d + "/train-images-idx3-ubyte");
    Touch(*d + "/train-labels-idx1-ubyte");
    return d;
  }();
  return *dir;
}

// A valid trainer job after defaults.
JobSpec TrainerJob() {
  JobSpec spec;
  spec.set_name("mnist-mlp");
  auto* t = spec.mutable_trainer();
  t->set_model("mlp");
  t->set_dataset("mnist");
  t->set_data_dir(MnistDir());
  spec.mutable_workers()->set_min(2);
  spec.mutable_budget()->set_max_steps(100);
  return WithDefaults(spec);
}

JobSpec CommandJob() {
  JobSpec spec;
  spec.set_name("cmd");
  spec.mutable_command()->add_argv("python3");
  spec.mutable_command()->add_argv("train.py");
  spec.mutable_workers()->set_min(1);
  return WithDefaults(spec);
}

TEST(WithDefaultsTest, FillsTrainerDefaults) {
  JobSpec spec;
  spec.mutable_trainer();
  spec.mutable_workers()->set_min(3);
  const JobSpec out = WithDefaults(spec);
  EXPECT_EQ(out.slots_per_worker(), 1);
  EXPECT_TRUE(out.workers().has_max());
  EXPECT_EQ(out.workers().max(), 3);
  EXPECT_EQ(out.trainer().batch_size(), 64);
  EXPECT_DOUBLE_EQ(out.trainer().lr(), 0.05);
  EXPECT_DOUBLE_EQ(out.trainer().momentum(), 0.9);
  EXPECT_EQ(out.trainer().seed(), 1u);
  EXPECT_THAT(out.trainer().hidden(), ElementsAre(256, 128));
  EXPECT_EQ(out.trainer().log_every(), 10);
  EXPECT_EQ(out.trainer().threads(), 1);
}

TEST(WithDefaultsTest, KeepsGivenValues) {
  JobSpec spec;
  auto* t = spec.mutable_trainer();
  t->set_batch_size(8);
  t->set_lr(0.5);
  t->set_momentum(0.5);
  t->set_seed(7);
  t->add_hidden(32);
  t->set_log_every(3);
  t->set_threads(4);
  spec.mutable_workers()->set_min(1);
  spec.mutable_workers()->set_max(5);
  spec.set_slots_per_worker(2);
  const JobSpec out = WithDefaults(spec);
  EXPECT_EQ(out.workers().max(), 5);
  EXPECT_EQ(out.slots_per_worker(), 2);
  EXPECT_EQ(out.trainer().batch_size(), 8);
  EXPECT_DOUBLE_EQ(out.trainer().lr(), 0.5);
  EXPECT_DOUBLE_EQ(out.trainer().momentum(), 0.5);
  EXPECT_EQ(out.trainer().seed(), 7u);
  EXPECT_THAT(out.trainer().hidden(), ElementsAre(32));
  EXPECT_EQ(out.trainer().log_every(), 3);
  EXPECT_EQ(out.trainer().threads(), 4);

  // An explicit momentum of 0 (plain SGD) is kept, not replaced by the default.
  spec.mutable_trainer()->set_momentum(0);
  EXPECT_TRUE(WithDefaults(spec).trainer().has_momentum());
  EXPECT_DOUBLE_EQ(WithDefaults(spec).trainer().momentum(), 0.0);
}

TEST(WithDefaultsTest, ExplicitZeroSlotsKeepsPresence) {
  JobSpec spec;
  spec.set_slots_per_worker(0);
  const JobSpec out = WithDefaults(spec);
  EXPECT_TRUE(out.has_slots_per_worker());
  EXPECT_EQ(out.slots_per_worker(), 0);
}

TEST(WithDefaultsTest, CommandGetsNoTrainerDefaults) {
  const JobSpec out = CommandJob();
  EXPECT_FALSE(out.has_trainer());
  EXPECT_EQ(out.workers().max(), 1);
  EXPECT_EQ(out.slots_per_worker(), 1);
}

TEST(ValidateJobSpecTest, AcceptsValidJobs) {
  EXPECT_OK(ValidateJobSpec(TrainerJob()));
  EXPECT_OK(ValidateJobSpec(CommandJob()));
}

TEST(ValidateJobSpecTest, Name) {
  for (const std::string& good : std::vector<std::string>{"a", "a-1", "job-7x", std::string(63, 'z')}) {
    JobSpec spec = TrainerJob();
    spec.set_name(good);
    EXPECT_OK(ValidateJobSpec(spec)) << good;
  }
  for (const std::string& bad : std::vector<std::string>{"", "1abc", "-a", "Abc", "a_b", "a.b", std::string(64, 'z')}) {
    JobSpec spec = TrainerJob();
    spec.set_name(bad);
    EXPECT_THAT(ValidateJobSpec(spec),
                StatusIs(kInvalid, HasSubstr("name: ")))
        << bad;
  }
  JobSpec spec = TrainerJob();
  spec.set_name("Bad");
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "name: 'Bad' is invalid; must be 1-63 characters of "
                                 "[a-z0-9-] starting with a lowercase letter"));
}

TEST(ValidateJobSpecTest, ProgramMustBeSet) {
  JobSpec spec = TrainerJob();
  spec.clear_trainer();
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "program: set exactly one of 'trainer' or 'command'"));
}

TEST(ValidateJobSpecTest, TrainerModelAndDataset) {
  JobSpec spec = TrainerJob();
  spec.mutable_trainer()->set_model("resnet");
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "trainer.model: 'resnet' is not supported; allowed: mlp"));
  spec = TrainerJob();
  spec.mutable_trainer()->set_dataset("cifar");
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "trainer.dataset: 'cifar' is not supported; allowed: mnist"));
}

TEST(ValidateJobSpecTest, TrainerDataDir) {
  JobSpec spec = TrainerJob();
  spec.mutable_trainer()->clear_data_dir();
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, HasSubstr("trainer.data_dir: is required")));

  spec.mutable_trainer()->set_data_dir("data/mnist");
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, HasSubstr("trainer.data_dir: 'data/mnist' is relative")));

  spec.mutable_trainer()->set_data_dir(MnistDir() + "/does-not-exist");
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, HasSubstr("No such file or directory")));

  spec.mutable_trainer()->set_data_dir(MnistDir() + "/train-images-idx3-ubyte");
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("is not a directory")));

  // Only the images: the error names the missing labels file.
  const std::string half = MakeTempDir("half");
  Touch(half + "/train-images-idx3-ubyte");
  spec.mutable_trainer()->set_data_dir(half);
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, HasSubstr("has no readable file train-labels-idx1-ubyte")));

  const std::string empty = MakeTempDir("empty");
  spec.mutable_trainer()->set_data_dir(empty);
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, HasSubstr("has no readable file train-images-idx3-ubyte")));
}

TEST(ValidateJobSpecTest, TrainerBatchSize) {
  for (int good : {1, 65536}) {
    JobSpec spec = TrainerJob();
    spec.mutable_trainer()->set_batch_size(good);
    EXPECT_OK(ValidateJobSpec(spec));
  }
  for (int bad : {-1, 0, 65537}) {
    JobSpec spec = TrainerJob();
    spec.mutable_trainer()->set_batch_size(bad);
    EXPECT_THAT(ValidateJobSpec(spec),
                StatusIs(kInvalid, absl::StrCat("trainer.batch_size: ", bad,
                                                " is out of range; must be 1..65536")));
  }
}

TEST(ValidateJobSpecTest, TrainerLr) {
  for (double bad : {-0.1, 0.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    JobSpec spec = TrainerJob();
    spec.mutable_trainer()->set_lr(bad);
    EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("trainer.lr: ")))
        << bad;
  }
}

TEST(ValidateJobSpecTest, TrainerMomentum) {
  for (double good : {0.0, 0.5, 0.999}) {
    JobSpec spec = TrainerJob();
    spec.mutable_trainer()->set_momentum(good);
    EXPECT_OK(ValidateJobSpec(spec));
  }
  for (double bad : {-0.1, 1.0, 1.5, std::nan("")}) {
    JobSpec spec = TrainerJob();
    spec.mutable_trainer()->set_momentum(bad);
    EXPECT_THAT(ValidateJobSpec(spec),
                StatusIs(kInvalid, HasSubstr("trainer.momentum: ")))
        << bad;
  }
}

TEST(ValidateJobSpecTest, TrainerHidden) {
  JobSpec spec = TrainerJob();
  spec.mutable_trainer()->clear_hidden();
  for (int i = 0; i < 16; ++i) spec.mutable_trainer()->add_hidden(8);
  EXPECT_OK(ValidateJobSpec(spec));
  spec.mutable_trainer()->add_hidden(8);
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "trainer.hidden: 17 layers is too many; at most 16"));

  spec = TrainerJob();
  spec.mutable_trainer()->clear_hidden();
  spec.mutable_trainer()->add_hidden(65536);
  spec.mutable_trainer()->add_hidden(0);
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "trainer.hidden[1]: 0 is out of range; must be 1..65536"));
  spec.mutable_trainer()->set_hidden(1, 65537);
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("trainer.hidden[1]: 65537")));
}

TEST(ValidateJobSpecTest, TrainerLogEveryAndThreads) {
  JobSpec spec = TrainerJob();
  spec.mutable_trainer()->set_log_every(-1);
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "trainer.log_every: -1 is invalid; must be >= 1"));
  for (int bad : {-1, 257}) {
    spec = TrainerJob();
    spec.mutable_trainer()->set_threads(bad);
    EXPECT_THAT(ValidateJobSpec(spec),
                StatusIs(kInvalid, absl::StrCat("trainer.threads: ", bad,
                                                " is out of range; must be 1..256")));
  }
  spec = TrainerJob();
  spec.mutable_trainer()->set_threads(256);
  EXPECT_OK(ValidateJobSpec(spec));
}

TEST(ValidateJobSpecTest, Command) {
  JobSpec spec = CommandJob();
  spec.mutable_command()->clear_argv();
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("command.argv: is empty")));
  spec.mutable_command()->add_argv("");
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("command.argv[0]: is empty")));

  spec = CommandJob();
  spec.mutable_command()->set_working_dir("rel/dir");
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "command.working_dir: 'rel/dir' is relative; must be empty "
                                 "or an absolute path"));
  spec.mutable_command()->set_working_dir("/abs");
  EXPECT_OK(ValidateJobSpec(spec));
}

TEST(ValidateJobSpecTest, Workers) {
  JobSpec spec = TrainerJob();
  spec.clear_workers();
  EXPECT_THAT(ValidateJobSpec(WithDefaults(spec)),
              StatusIs(kInvalid, "workers.min: 0 is invalid; required, must be >= 1"));

  spec = TrainerJob();
  spec.mutable_workers()->set_min(2);
  spec.mutable_workers()->set_max(1);
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "workers.max: 1 is less than workers.min (2); must be >= min"));

  spec.mutable_workers()->set_max(1025);
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "workers.max: 1025 is too large; must be <= 1024"));
  spec.mutable_workers()->set_max(1024);
  EXPECT_OK(ValidateJobSpec(spec));

  spec.mutable_workers()->set_min(1025);
  spec.mutable_workers()->clear_max();
  EXPECT_THAT(ValidateJobSpec(WithDefaults(spec)),
              StatusIs(kInvalid, HasSubstr("workers.min: 1025 is too large")));
}

TEST(ValidateJobSpecTest, SlotsPerWorker) {
  JobSpec spec = TrainerJob();
  spec.set_slots_per_worker(0);
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "slots_per_worker: 0 (zero slots) is out of range; must be "
                                 "1..64"));
  spec.set_slots_per_worker(65);
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("slots_per_worker: 65")));
  spec.set_slots_per_worker(64);
  EXPECT_OK(ValidateJobSpec(spec));
}

TEST(ValidateJobSpecTest, Env) {
  JobSpec spec = TrainerJob();
  (*spec.mutable_env())["OMP_NUM_THREADS"] = "1";
  (*spec.mutable_env())["_x9"] = "";
  EXPECT_OK(ValidateJobSpec(spec));

  for (const std::string& bad : std::vector<std::string>{"9X", "A-B", "", "A B"}) {
    JobSpec s = TrainerJob();
    (*s.mutable_env())[bad] = "v";
    EXPECT_THAT(ValidateJobSpec(s),
                StatusIs(kInvalid, absl::StrCat("env.", bad, ": is not a valid variable name; "
                                                "must match [A-Za-z_][A-Za-z0-9_]*")));
  }
  for (const std::string& reserved : std::vector<std::string>{"RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK",
        "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR",
        "MASTER_PORT", "TORCHELASTIC_RUN_ID", "BATON_METRICS_FD"}) {
    JobSpec s = TrainerJob();
    (*s.mutable_env())[reserved] = "v";
    EXPECT_THAT(ValidateJobSpec(s),
                StatusIs(kInvalid, HasSubstr(absl::StrCat("env.", reserved, ": is reserved"))));
  }
  // The first bad key in sorted order is reported.
  (*spec.mutable_env())["RANK"] = "1";
  (*spec.mutable_env())["MASTER_PORT"] = "1";
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("env.MASTER_PORT")));
}

TEST(ValidateJobSpecTest, CheckpointDir) {
  JobSpec spec = TrainerJob();
  spec.set_checkpoint_dir("ckpt");
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, HasSubstr("checkpoint_dir: 'ckpt' is relative")));
  spec.set_checkpoint_dir("/shared/ckpt");
  EXPECT_OK(ValidateJobSpec(spec));
}

TEST(ValidateJobSpecTest, Budget) {
  JobSpec spec = TrainerJob();
  spec.mutable_budget()->set_max_steps(-1);
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, "budget.max_steps: -1 is negative; must be >= 0 (0 = no "
                                 "limit)"));
  spec.mutable_budget()->set_max_steps(0);
  spec.mutable_budget()->set_max_epochs(-2);
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("budget.max_epochs: -2")));

  spec.mutable_budget()->set_max_epochs(0);
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, HasSubstr("budget: the trainer needs a limit")));
  spec.mutable_budget()->set_max_epochs(3);
  EXPECT_OK(ValidateJobSpec(spec));

  // A command may run without a budget, but not with a negative one.
  JobSpec cmd = CommandJob();
  EXPECT_OK(ValidateJobSpec(cmd));
  cmd.mutable_budget()->set_max_steps(-5);
  EXPECT_THAT(ValidateJobSpec(cmd), StatusIs(kInvalid, HasSubstr("budget.max_steps")));
}

TEST(ValidateJobSpecTest, ReportsFirstErrorInFieldOrder) {
  JobSpec spec = TrainerJob();
  spec.mutable_budget()->set_max_steps(-1);
  spec.set_slots_per_worker(0);
  spec.mutable_workers()->set_max(1);
  spec.mutable_trainer()->set_threads(0);
  spec.set_name("X");
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("name: ")));
  spec.set_name("x");
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("trainer.threads: ")));
  spec.mutable_trainer()->set_threads(1);
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("workers.max: ")));
  spec.mutable_workers()->set_max(2);
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("slots_per_worker: ")));
  spec.set_slots_per_worker(1);
  EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, HasSubstr("budget.max_steps: ")));
}

}  // namespace
}  // namespace baton
