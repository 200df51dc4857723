#include "common/spec/job_spec.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/spec/trainer_spec.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

// Validation, then the file system checks of a trainer's paths.
absl::Status ValidateAndCheckPaths(const baton::v1::JobSpec& spec) {
  RETURN_IF_ERROR(ValidateJobSpec(spec));
  return spec.has_trainer() ? CheckTrainerSpecPaths(spec.trainer()) : absl::OkStatus();
}

using baton::v1::JobSpec;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

// A fresh directory under the test's temp dir.
std::string MakeTempDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir =
      absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/job_spec_test_", getpid(), "_", name);
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
  const auto& t = out.trainer();
  EXPECT_EQ(t.precision(), "fp32");
  EXPECT_EQ(t.accumulation_steps(), 1);
  EXPECT_DOUBLE_EQ(t.bucket_cap_mb(), 25);
  EXPECT_EQ(t.grad_compression(), "none");
  EXPECT_EQ(t.max_grad_norm(), 0);
  EXPECT_EQ(t.activation_checkpointing(), "none");
  EXPECT_EQ(t.zero().stage(), 0);
  EXPECT_FALSE(t.zero().offload_optimizer());
  EXPECT_EQ(t.optimizer(), "sgd");
  EXPECT_EQ(t.weight_decay(), 0);
  EXPECT_FALSE(t.nesterov());
  EXPECT_DOUBLE_EQ(t.adam_beta1(), 0.9);
  EXPECT_DOUBLE_EQ(t.adam_beta2(), 0.999);
  EXPECT_DOUBLE_EQ(t.adam_eps(), 1e-8);
  EXPECT_EQ(t.lr_schedule(), "constant");
  EXPECT_EQ(t.warmup_steps(), 0);
  EXPECT_DOUBLE_EQ(t.lr_gamma(), 0.1);
  EXPECT_EQ(t.loader_threads(), 2);
  EXPECT_EQ(t.prefetch_batches(), 4);
  EXPECT_EQ(t.image_size(), 0);  // Not image_folder: the dataset's own default.
  EXPECT_EQ(t.context_length(), 128);
  EXPECT_EQ(t.synthetic_samples(), 8192);
  EXPECT_EQ(t.num_classes(), 10);
  EXPECT_EQ(t.gpt_layers(), 4);
  EXPECT_EQ(t.gpt_heads(), 4);
  EXPECT_EQ(t.gpt_width(), 256);
  EXPECT_EQ(t.vocab_size(), 50304);
  EXPECT_EQ(t.task(), "classification");
  EXPECT_EQ(t.checkpoint_every(), 0);
  EXPECT_EQ(t.keep_checkpoints(), 3);

  spec.mutable_trainer()->set_dataset("image_folder");
  EXPECT_EQ(WithDefaults(spec).trainer().image_size(), 224);
}

TEST(WithDefaultsTest, KeepsExplicitZerosOfFieldsWithPresence) {
  JobSpec spec;
  auto* t = spec.mutable_trainer();
  t->set_adam_beta1(0);
  t->set_adam_beta2(0.5);
  t->set_adam_eps(0);
  t->set_lr_gamma(0.5);
  t->set_precision("bf16");
  t->set_accumulation_steps(8);
  const JobSpec out = WithDefaults(spec);
  EXPECT_EQ(out.trainer().adam_beta1(), 0);
  EXPECT_EQ(out.trainer().adam_beta2(), 0.5);
  EXPECT_EQ(out.trainer().adam_eps(), 0);
  EXPECT_EQ(out.trainer().lr_gamma(), 0.5);
  EXPECT_EQ(out.trainer().precision(), "bf16");
  EXPECT_EQ(out.trainer().accumulation_steps(), 8);
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
  for (const std::string& good :
       std::vector<std::string>{"a", "a-1", "job-7x", std::string(63, 'z')}) {
    JobSpec spec = TrainerJob();
    spec.set_name(good);
    EXPECT_OK(ValidateAndCheckPaths(spec)) << good;
  }
  for (const std::string& bad :
       std::vector<std::string>{"", "1abc", "-a", "Abc", "a_b", "a.b", std::string(64, 'z')}) {
    JobSpec spec = TrainerJob();
    spec.set_name(bad);
    EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("name: "))) << bad;
  }
  JobSpec spec = TrainerJob();
  spec.set_name("Bad");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "name: 'Bad' is invalid; must be 1-63 characters of "
                       "[a-z0-9-] starting with a lowercase letter"));
}

TEST(ValidateJobSpecTest, ProgramMustBeSet) {
  JobSpec spec = TrainerJob();
  spec.clear_trainer();
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, "program: set exactly one of 'trainer' or 'command'"));
}

TEST(ValidateJobSpecTest, TrainerModelAndDataset) {
  JobSpec spec = TrainerJob();
  spec.mutable_trainer()->set_model("resnet");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "trainer.model: 'resnet' is not supported; allowed: mlp, "
                       "resnet18, resnet50, gpt, torchscript"));
  spec = TrainerJob();
  spec.mutable_trainer()->set_dataset("cifar");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "trainer.dataset: 'cifar' is not supported; allowed: mnist, "
                       "cifar10, image_folder, tokens, synthetic"));
}

TEST(ValidateJobSpecTest, TrainerDataDir) {
  JobSpec spec = TrainerJob();
  spec.mutable_trainer()->clear_data_dir();
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("trainer.data_dir: is required")));

  spec.mutable_trainer()->set_data_dir("data/mnist");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("trainer.data_dir: 'data/mnist' is relative")));

  spec.mutable_trainer()->set_data_dir(MnistDir() + "/does-not-exist");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("No such file or directory")));

  spec.mutable_trainer()->set_data_dir(MnistDir() + "/train-images-idx3-ubyte");
  EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("is not a directory")));

  // Only the images: the error names the missing labels file.
  const std::string half = MakeTempDir("half");
  Touch(half + "/train-images-idx3-ubyte");
  spec.mutable_trainer()->set_data_dir(half);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("has no readable file train-labels-idx1-ubyte")));

  const std::string empty = MakeTempDir("empty");
  spec.mutable_trainer()->set_data_dir(empty);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("has no readable file train-images-idx3-ubyte")));
}

// Validation touches no file system (a hung mount cannot stall it); the path checks do.
TEST(ValidateJobSpecTest, OnlyCheckTrainerSpecPathsTouchesTheFileSystem) {
  JobSpec spec = TrainerJob();
  spec.mutable_trainer()->set_data_dir("/nonexistent/mnist");
  EXPECT_OK(ValidateJobSpec(spec));
  EXPECT_THAT(
      CheckTrainerSpecPaths(spec.trainer()),
      StatusIs(kInvalid, HasSubstr("trainer.data_dir: /nonexistent/mnist is not accessible")));
}

TEST(ValidateJobSpecTest, TrainerDataDirPerDataset) {
  JobSpec spec = TrainerJob();
  auto* t = spec.mutable_trainer();
  // synthetic reads no files: an empty data_dir is fine, a set one is not.
  t->set_dataset("synthetic");
  t->clear_data_dir();
  EXPECT_OK(ValidateAndCheckPaths(spec));
  t->set_data_dir(MnistDir());
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("trainer.data_dir: '" + MnistDir() +
                                           "' is set; must be empty for the synthetic")));

  // cifar10: data_batch_1.bin in the directory or in cifar-10-batches-bin/.
  t->set_dataset("cifar10");
  const std::string cifar = MakeTempDir("cifar");
  t->set_data_dir(cifar);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("has no readable file data_batch_1.bin")));
  mkdir((cifar + "/cifar-10-batches-bin").c_str(), 0755);
  Touch(cifar + "/cifar-10-batches-bin/data_batch_1.bin");
  EXPECT_OK(ValidateAndCheckPaths(spec));

  // tokens: train.bin, and a language model.
  t->set_dataset("tokens");
  const std::string tokens = MakeTempDir("tokens");
  t->set_data_dir(tokens);
  t->set_model("gpt");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("has no readable file train.bin")));
  Touch(tokens + "/train.bin");
  EXPECT_OK(ValidateAndCheckPaths(spec));
  t->set_model("mlp");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("trainer.model: 'mlp' is a classifier")));

  // image_folder: at least one class sub-directory.
  t->set_model("resnet18");
  t->set_dataset("image_folder");
  const std::string images = MakeTempDir("images");
  t->set_data_dir(images);
  Touch(images + "/stray.jpg");
  EXPECT_THAT(
      ValidateAndCheckPaths(spec),
      StatusIs(kInvalid, HasSubstr("trainer.data_dir: " + images + " has no sub-directory")));
  mkdir((images + "/cat").c_str(), 0755);
  EXPECT_OK(ValidateAndCheckPaths(spec));

  // A language model needs token data (or synthetic).
  t->set_model("gpt");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("trainer.dataset: 'image_folder' holds images")));
  t->set_dataset("synthetic");
  t->clear_data_dir();
  EXPECT_OK(ValidateAndCheckPaths(spec));
}

TEST(ValidateJobSpecTest, TrainerNumericsOptimisationAndData) {
  struct Case {
    std::function<void(baton::v1::TrainerSpec&)> mutate;
    std::string want;  // Expected message prefix ("" = valid).
  };
  const std::vector<Case> cases = {
      {[](auto& t) { t.set_precision("fp8"); }, "trainer.precision: 'fp8' is not supported"},
      {[](auto& t) { t.set_precision("bf16"); }, ""},
      {[](auto& t) { t.set_accumulation_steps(-1); }, "trainer.accumulation_steps: -1"},
      {[](auto& t) { t.set_accumulation_steps(1025); }, "trainer.accumulation_steps: 1025"},
      {[](auto& t) { t.set_bucket_cap_mb(-1); }, "trainer.bucket_cap_mb: -1 is out of range"},
      {[](auto& t) { t.set_bucket_cap_mb(0.5); }, ""},
      {[](auto& t) { t.set_grad_compression("int8"); }, "trainer.grad_compression: 'int8'"},
      {[](auto& t) { t.set_grad_compression("fp16"); }, ""},
      {[](auto& t) { t.set_max_grad_norm(-0.5); }, "trainer.max_grad_norm: -0.5 is out of range"},
      {[](auto& t) { t.set_max_grad_norm(std::nan("")); }, "trainer.max_grad_norm: "},
      {[](auto& t) { t.set_optimizer("lamb"); }, "trainer.optimizer: 'lamb' is not supported"},
      {[](auto& t) { t.set_optimizer("adamw"); }, ""},
      {[](auto& t) { t.set_weight_decay(-1); }, "trainer.weight_decay: -1 is out of range"},
      {[](auto& t) { t.set_nesterov(true); }, ""},
      {[](auto& t) {
         t.set_nesterov(true);
         t.set_momentum(0);
       },
       "trainer.nesterov: needs"},
      {[](auto& t) {
         t.set_nesterov(true);
         t.set_optimizer("adamw");
       },
       "trainer.nesterov: "},
      {[](auto& t) { t.set_adam_beta1(1); }, "trainer.adam_beta1: 1 is out of range"},
      {[](auto& t) { t.set_adam_beta2(-0.1); }, "trainer.adam_beta2: -0.1 is out of range"},
      {[](auto& t) { t.set_adam_eps(-1e-8); }, "trainer.adam_eps: "},
      {[](auto& t) { t.set_lr_schedule("linear"); }, "trainer.lr_schedule: 'linear'"},
      {[](auto& t) {
         t.set_lr_schedule("cosine");
         t.set_warmup_steps(10);
       },
       ""},
      {[](auto& t) { t.set_warmup_steps(-1); }, "trainer.warmup_steps: -1 is out of range"},
      {[](auto& t) { t.set_lr_schedule("step"); }, "trainer.lr_step_size: 0 is invalid"},
      {[](auto& t) {
         t.set_lr_schedule("step");
         t.set_lr_step_size(10);
       },
       ""},
      {[](auto& t) { t.set_lr_gamma(0); }, "trainer.lr_gamma: 0 is out of range"},
      {[](auto& t) { t.set_min_lr(-1); }, "trainer.min_lr: -1 is out of range"},
      {[](auto& t) { t.set_base_batch(-8); }, "trainer.base_batch: -8 is out of range"},
      {[](auto& t) { t.set_base_batch(256); }, ""},
      {[](auto& t) { t.set_loader_threads(-1); }, "trainer.loader_threads: -1"},
      {[](auto& t) { t.set_prefetch_batches(-1); }, "trainer.prefetch_batches: -1"},
      {[](auto& t) { t.set_image_size(-1); }, "trainer.image_size: -1"},
      {[](auto& t) { t.set_context_length(-1); }, "trainer.context_length: -1"},
      {[](auto& t) { t.set_synthetic_samples(-1); }, "trainer.synthetic_samples: -1"},
      {[](auto& t) { t.set_num_classes(1); }, "trainer.num_classes: 1 is out of range"},
      {[](auto& t) { t.set_gpt_layers(-1); }, "trainer.gpt_layers: -1"},
      {[](auto& t) { t.set_gpt_heads(300); }, "trainer.gpt_heads: 300"},
      {[](auto& t) { t.set_gpt_width(250); }, "trainer.gpt_width: 250 is not divisible"},
      {[](auto& t) { t.set_vocab_size(1); }, "trainer.vocab_size: 1"},
      {[](auto& t) { t.set_task("regression"); }, "trainer.task: 'regression'"},
      {[](auto& t) { t.set_torchscript_path("/m.pt"); }, "trainer.torchscript_path: is set"},
      {[](auto& t) { t.set_model("torchscript"); }, "trainer.torchscript_path: '' is invalid"},
      {[](auto& t) {
         t.set_model("torchscript");
         t.set_torchscript_path("/nonexistent.pt");
       },
       "trainer.torchscript_path: /nonexistent.pt is not a readable file"},
      {[](auto& t) { t.set_activation_checkpointing("all"); },
       "trainer.activation_checkpointing: 'all' is not supported; allowed: none, blocks"},
      {[](auto& t) { t.set_activation_checkpointing("blocks"); },
       "trainer.activation_checkpointing: 'blocks' is not supported by model 'mlp'"},
      {[](auto& t) {
         t.set_model("torchscript");
         t.set_torchscript_path("/m.pt");
         t.set_activation_checkpointing("blocks");
       },
       "trainer.activation_checkpointing: 'blocks' is not supported by model 'torchscript'"},
      {[](auto& t) { t.set_activation_checkpointing("none"); }, ""},
      {[](auto& t) { t.mutable_zero()->set_stage(2); }, ""},
      {[](auto& t) {
         t.mutable_zero()->set_stage(2);
         t.set_grad_compression("bf16");
       },
       "trainer.zero.stage: 2 cannot be combined with trainer.grad_compression=bf16"},
      {[](auto& t) { t.mutable_zero()->set_stage(3); },
       "trainer.zero.stage: 3 is out of range; must be 0..2"},
      {[](auto& t) { t.mutable_zero()->set_stage(-1); },
       "trainer.zero.stage: -1 is out of range; must be 0..2"},
      {[](auto& t) { t.mutable_zero()->set_offload_optimizer(true); },
       "trainer.zero.offload_optimizer: true needs trainer.zero.stage 1 or 2"},
      {[](auto& t) {
         t.mutable_zero()->set_stage(1);
         t.mutable_zero()->set_offload_optimizer(true);
       },
       ""},
      {[](auto& t) { t.mutable_zero()->set_stage(1); }, ""},
      {[](auto& t) { t.mutable_zero()->set_stage(0); }, ""},
      {[](auto& t) {
         t.set_model("resnet18");
         t.set_activation_checkpointing("blocks");
       },
       ""},
      {[](auto& t) {
         t.set_model("gpt");
         t.set_dataset("synthetic");
         t.clear_data_dir();
         t.set_activation_checkpointing("blocks");
       },
       ""},
      {[](auto& t) { t.set_checkpoint_every(-5); }, "trainer.checkpoint_every: -5 is out of range"},
      {[](auto& t) {
         t.set_checkpoint_every(100);
         t.set_keep_checkpoints(1);
       },
       ""},
      {[](auto& t) { t.set_keep_checkpoints(-1); }, "trainer.keep_checkpoints: -1"},
      {[](auto& t) { t.set_keep_checkpoints(1000); }, ""},
      {[](auto& t) { t.set_keep_checkpoints(5000); },
       "trainer.keep_checkpoints: 5000 is out of range; must be 1..1000"},
  };
  for (const Case& c : cases) {
    JobSpec spec = TrainerJob();
    spec.set_checkpoint_dir("/shared/ckpt");  // Checkpointing on 2 workers needs one.
    c.mutate(*spec.mutable_trainer());
    if (c.want.empty()) {
      EXPECT_OK(ValidateAndCheckPaths(spec)) << spec.trainer().ShortDebugString();
    } else {
      EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, ::testing::StartsWith(c.want)))
          << spec.trainer().ShortDebugString();
    }
  }
  // A torchscript module file that exists passes.
  JobSpec spec = TrainerJob();
  const std::string module = MakeTempDir("ts") + "/model.pt";
  Touch(module);
  spec.mutable_trainer()->set_model("torchscript");
  spec.mutable_trainer()->set_torchscript_path(module);
  EXPECT_OK(ValidateAndCheckPaths(spec));
}

TEST(ValidateJobSpecTest, TrainerBatchSize) {
  for (int good : {1, 65536}) {
    JobSpec spec = TrainerJob();
    spec.mutable_trainer()->set_batch_size(good);
    EXPECT_OK(ValidateAndCheckPaths(spec));
  }
  for (int bad : {-1, 0, 65537}) {
    JobSpec spec = TrainerJob();
    spec.mutable_trainer()->set_batch_size(bad);
    EXPECT_THAT(ValidateAndCheckPaths(spec),
                StatusIs(kInvalid, absl::StrCat("trainer.batch_size: ", bad,
                                                " is out of range; must be 1..65536")));
  }
}

TEST(ValidateJobSpecTest, TrainerLr) {
  for (double bad : {-0.1, 0.0, std::numeric_limits<double>::infinity(), std::nan("")}) {
    JobSpec spec = TrainerJob();
    spec.mutable_trainer()->set_lr(bad);
    EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("trainer.lr: "))) << bad;
  }
}

TEST(ValidateJobSpecTest, TrainerMomentum) {
  for (double good : {0.0, 0.5, 0.999}) {
    JobSpec spec = TrainerJob();
    spec.mutable_trainer()->set_momentum(good);
    EXPECT_OK(ValidateAndCheckPaths(spec));
  }
  for (double bad : {-0.1, 1.0, 1.5, std::nan("")}) {
    JobSpec spec = TrainerJob();
    spec.mutable_trainer()->set_momentum(bad);
    EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("trainer.momentum: ")))
        << bad;
  }
}

TEST(ValidateJobSpecTest, TrainerHidden) {
  JobSpec spec = TrainerJob();
  spec.mutable_trainer()->clear_hidden();
  for (int i = 0; i < 16; ++i) spec.mutable_trainer()->add_hidden(8);
  EXPECT_OK(ValidateAndCheckPaths(spec));
  spec.mutable_trainer()->add_hidden(8);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, "trainer.hidden: 17 layers is too many; at most 16"));

  spec = TrainerJob();
  spec.mutable_trainer()->clear_hidden();
  spec.mutable_trainer()->add_hidden(65536);
  spec.mutable_trainer()->add_hidden(0);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, "trainer.hidden[1]: 0 is out of range; must be 1..65536"));
  spec.mutable_trainer()->set_hidden(1, 65537);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("trainer.hidden[1]: 65537")));
}

TEST(ValidateJobSpecTest, TrainerLogEveryAndThreads) {
  JobSpec spec = TrainerJob();
  spec.mutable_trainer()->set_log_every(-1);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, "trainer.log_every: -1 is out of range; must be 1..2147483647"));
  for (int bad : {-1, 257}) {
    spec = TrainerJob();
    spec.mutable_trainer()->set_threads(bad);
    EXPECT_THAT(ValidateAndCheckPaths(spec),
                StatusIs(kInvalid, absl::StrCat("trainer.threads: ", bad,
                                                " is out of range; must be 1..256")));
  }
  spec = TrainerJob();
  spec.mutable_trainer()->set_threads(256);
  EXPECT_OK(ValidateAndCheckPaths(spec));
}

TEST(ValidateJobSpecTest, Command) {
  JobSpec spec = CommandJob();
  spec.mutable_command()->clear_argv();
  EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("command.argv: is empty")));
  spec.mutable_command()->add_argv("");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("command.argv[0]: is empty")));

  spec = CommandJob();
  spec.mutable_command()->set_working_dir("rel/dir");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "command.working_dir: 'rel/dir' is relative; must be empty "
                       "or an absolute path"));
  spec.mutable_command()->set_working_dir("/abs");
  EXPECT_OK(ValidateAndCheckPaths(spec));
}

TEST(ValidateJobSpecTest, ElasticCommandNeedsACheckpointDir) {
  JobSpec spec = CommandJob();
  spec.mutable_command()->set_elastic(true);
  EXPECT_THAT(ValidateJobSpec(spec),
              StatusIs(kInvalid, HasSubstr("checkpoint_dir: is required when command.elastic "
                                           "is true")));
  spec.set_checkpoint_dir("/shared/ckpt");
  EXPECT_OK(ValidateJobSpec(spec));
  // A command job that is not elastic needs none.
  EXPECT_OK(ValidateJobSpec(CommandJob()));
}

TEST(CheckpointsOnRequestTest, TrainerAndElasticCommandsOnly) {
  EXPECT_TRUE(CheckpointsOnRequest(TrainerJob()));
  JobSpec spec = CommandJob();
  EXPECT_FALSE(CheckpointsOnRequest(spec));
  spec.mutable_command()->set_elastic(true);
  EXPECT_TRUE(CheckpointsOnRequest(spec));
}

TEST(ValidateJobSpecTest, Workers) {
  JobSpec spec = TrainerJob();
  spec.clear_workers();
  EXPECT_THAT(ValidateJobSpec(WithDefaults(spec)),
              StatusIs(kInvalid, "workers.min: 0 is invalid; required, must be >= 1"));

  spec = TrainerJob();
  spec.mutable_workers()->set_min(2);
  spec.mutable_workers()->set_max(1);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, "workers.max: 1 is less than workers.min (2); must be >= min"));

  spec.mutable_workers()->set_max(10001);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, "workers.max: 10001 is too large; must be <= 10000"));
  spec.mutable_workers()->set_max(10000);
  EXPECT_OK(ValidateAndCheckPaths(spec));

  spec.mutable_workers()->set_min(10001);
  spec.mutable_workers()->clear_max();
  EXPECT_THAT(ValidateJobSpec(WithDefaults(spec)),
              StatusIs(kInvalid, HasSubstr("workers.min: 10001 is too large")));

  // Workers x slots: the ranks the job's record lists.
  spec.mutable_workers()->set_min(2000);
  spec.set_slots_per_worker(32);
  EXPECT_OK(ValidateJobSpec(WithDefaults(spec)));
  spec.mutable_workers()->set_max(2049);
  EXPECT_THAT(ValidateJobSpec(WithDefaults(spec)),
              StatusIs(kInvalid,
                       "workers.max: 2049 workers x slots_per_worker 32 = 65568 ranks, "
                       "more than 65536; use fewer workers"));
}

TEST(ValidateJobSpecTest, SlotsPerWorker) {
  JobSpec spec = TrainerJob();
  spec.set_slots_per_worker(0);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "slots_per_worker: 0 (zero slots) is out of range; must be "
                       "1..64"));
  spec.set_slots_per_worker(65);
  EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("slots_per_worker: 65")));
  spec.set_slots_per_worker(64);
  EXPECT_OK(ValidateAndCheckPaths(spec));
}

// The global batch must split evenly over every world size in workers.min..max x slots.
TEST(ValidateJobSpecTest, GlobalBatchFitsEveryWorldSize) {
  JobSpec spec = TrainerJob();
  spec.mutable_workers()->set_min(2);
  spec.mutable_workers()->set_max(4);
  spec.mutable_trainer()->set_global_batch(48);  // 2, 3, 4 ranks: 24, 16, 12 each.
  EXPECT_OK(ValidateAndCheckPaths(spec));
  spec.set_slots_per_worker(5);  // 10, 15, 20 ranks: 10 does not divide 48.
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "trainer.global_batch: 48 cannot be split evenly over 10 ranks "
                       "(2 workers x 5 slots), a size the job may run at; use a "
                       "multiple of every world size in 10..20"));
  spec.mutable_trainer()->set_global_batch(60);
  EXPECT_OK(ValidateAndCheckPaths(spec));
  spec.mutable_trainer()->set_accumulation_steps(2);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("trainer.accumulation_steps: 2 is set with "
                                           "trainer.global_batch")));
  spec.mutable_trainer()->set_accumulation_steps(1);
  spec.mutable_trainer()->set_global_batch(-8);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("trainer.global_batch: -8")));
}

// trainer.pipeline: ranges, the rules between its fields and the model, batch, ZeRO,
// activation checkpointing, precision and accumulation, the world sizes; a valid pipeline
// is accepted.
TEST(ValidateJobSpecTest, Pipeline) {
  struct Case {
    std::function<void(JobSpec&)> mutate;
    std::string want;  // The whole message ("" = valid).
  };
  auto pipeline = [](JobSpec& spec, int stages, int micro_batches) {
    spec.mutable_trainer()->mutable_pipeline()->set_stages(stages);
    spec.mutable_trainer()->mutable_pipeline()->set_micro_batches(micro_batches);
  };
  auto gpt = [](JobSpec& spec) {
    spec.mutable_trainer()->set_model("gpt");
    spec.mutable_trainer()->set_dataset("synthetic");
    spec.mutable_trainer()->clear_data_dir();
  };
  const std::vector<Case> cases = {
      {[](JobSpec&) {}, ""},
      {[&](JobSpec& s) { pipeline(s, 65, 65); },
       "trainer.pipeline.stages: 65 is out of range; must be 1..64 (1 = no pipeline)"},
      {[&](JobSpec& s) { pipeline(s, 1, 0); },
       "trainer.pipeline.micro_batches: 0 is out of range; must be 1..1024"},
      {[&](JobSpec& s) { s.mutable_trainer()->mutable_pipeline()->set_schedule("interleaved"); },
       "trainer.pipeline.schedule: 'interleaved' is not supported; allowed: gpipe, 1f1b"},
      {[&](JobSpec& s) { pipeline(s, 2, 1); },
       "trainer.pipeline.micro_batches: 1 is fewer than the 2 stages; must be >= "
       "trainer.pipeline.stages"},
      {[&](JobSpec& s) { pipeline(s, 4, 4); },
       "trainer.pipeline.stages: 4 stages for an mlp of 3 layers; must be at most its layers "
       "(hidden widths + 1)"},
      {[&](JobSpec& s) {
         pipeline(s, 2, 2);
         s.mutable_trainer()->set_model("resnet18");
       },
       "trainer.pipeline.stages: model 'resnet18' cannot be split into stages; allowed with "
       "models gpt and mlp"},
      {[&](JobSpec& s) {
         gpt(s);
         pipeline(s, 3, 4);
       },
       "trainer.pipeline.stages: 3 does not divide trainer.gpt_layers 4; must divide it"},
      {[&](JobSpec& s) { pipeline(s, 2, 3); },
       "trainer.pipeline.micro_batches: 3 does not divide trainer.batch_size 64; must divide it"},
      {[&](JobSpec& s) {
         pipeline(s, 2, 4);
         s.mutable_trainer()->mutable_zero()->set_stage(1);
       },
       "trainer.pipeline.stages: pipeline parallelism is not supported with trainer.zero.stage "
       "1; allowed with trainer.zero.stage 0"},
      {[&](JobSpec& s) {
         gpt(s);
         pipeline(s, 2, 4);
         s.mutable_trainer()->set_activation_checkpointing("blocks");
       },
       "trainer.pipeline.stages: pipeline parallelism is not supported with "
       "trainer.activation_checkpointing 'blocks'; allowed with 'none'"},
      {[&](JobSpec& s) {
         pipeline(s, 2, 4);
         s.mutable_workers()->set_min(2);
         s.mutable_workers()->set_max(3);
       },
       "trainer.pipeline.stages: 2 does not divide 3 ranks (3 workers x 1 slots), a size the "
       "job may run at; every world size in 2..3 must be a multiple of the stages"},
      {[&](JobSpec& s) {
         gpt(s);
         pipeline(s, 2, 4);
         s.mutable_trainer()->mutable_pipeline()->set_schedule("gpipe");
       },
       ""},
      {[&](JobSpec& s) {
         pipeline(s, 2, 4);
         s.mutable_trainer()->set_sample_log("/tmp/samples");
       },
       "trainer.sample_log is not supported with trainer.pipeline.stages=2"},
      {[&](JobSpec& s) {
         pipeline(s, 2, 4);
         s.mutable_trainer()->set_precision("fp16");
       },
       "trainer.precision: 'fp16' is not supported with pipeline parallelism "
       "(trainer.pipeline.stages 2); allowed: fp32"},
      {[&](JobSpec& s) {
         pipeline(s, 2, 4);
         s.mutable_trainer()->set_accumulation_steps(2);
       },
       "trainer.accumulation_steps: 2 is not supported with pipeline parallelism "
       "(trainer.pipeline.stages 2); allowed: 1 (a pipeline accumulates over its "
       "trainer.pipeline.micro_batches instead)"},
  };
  for (const Case& c : cases) {
    JobSpec spec = TrainerJob();
    c.mutate(spec);
    if (c.want.empty()) {
      EXPECT_OK(ValidateJobSpec(spec)) << spec.ShortDebugString();
    } else {
      EXPECT_THAT(ValidateJobSpec(spec), StatusIs(kInvalid, c.want)) << spec.ShortDebugString();
    }
  }
  // Defaults: one stage, one micro-batch, 1F1B.
  const baton::v1::PipelineSpec defaults = TrainerJob().trainer().pipeline();
  EXPECT_EQ(defaults.stages(), 1);
  EXPECT_EQ(defaults.micro_batches(), 1);
  EXPECT_EQ(defaults.schedule(), "1f1b");
}

TEST(ValidateJobSpecTest, Env) {
  JobSpec spec = TrainerJob();
  (*spec.mutable_env())["OMP_NUM_THREADS"] = "1";
  (*spec.mutable_env())["_x9"] = "";
  EXPECT_OK(ValidateAndCheckPaths(spec));

  for (const std::string& bad : std::vector<std::string>{"9X", "A-B", "", "A B"}) {
    JobSpec s = TrainerJob();
    (*s.mutable_env())[bad] = "v";
    EXPECT_THAT(ValidateJobSpec(s),
                StatusIs(kInvalid, absl::StrCat("env.", bad,
                                                ": is not a valid variable name; "
                                                "must match [A-Za-z_][A-Za-z0-9_]*")));
  }
  for (const std::string& reserved : std::vector<std::string>{
           "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
           "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME", "MASTER_ADDR", "MASTER_PORT",
           "TORCHELASTIC_RUN_ID", "BATON_METRICS_FD"}) {
    JobSpec s = TrainerJob();
    (*s.mutable_env())[reserved] = "v";
    EXPECT_THAT(ValidateJobSpec(s),
                StatusIs(kInvalid, HasSubstr(absl::StrCat("env.", reserved, ": is reserved"))));
  }
  // What would load other code into the built-in trainer (a warm standby included), named.
  for (const std::string& loader :
       std::vector<std::string>{"LD_PRELOAD", "LD_AUDIT", "LD_LIBRARY_PATH", "GLIBC_TUNABLES",
                                "GCONV_PATH", "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH",
                                "NCCL_NET_PLUGIN", "NCCL_TUNER_PLUGIN", "OMP_TOOL_LIBRARIES"}) {
    JobSpec s = TrainerJob();
    (*s.mutable_env())[loader] = "/tmp/evil.so";
    EXPECT_THAT(ValidateJobSpec(s),
                StatusIs(kInvalid, HasSubstr(absl::StrCat("env.", loader,
                                                          ": makes the built-in trainer load"))));
    // A command job runs code of its own anyway: allowed there.
    JobSpec command = TrainerJob();
    command.clear_trainer();
    command.mutable_command()->add_argv("/bin/true");
    (*command.mutable_env())[loader] = "/tmp/evil.so";
    EXPECT_OK(ValidateJobSpec(command)) << loader;
  }
  for (const std::string& fine : std::vector<std::string>{"NCCL_DEBUG", "NCCL_SOCKET_IFNAME",
                                                          "OMP_NUM_THREADS", "MALLOC_ARENA_MAX"}) {
    JobSpec s = TrainerJob();
    (*s.mutable_env())[fine] = "1";
    EXPECT_OK(ValidateJobSpec(s)) << fine;
  }
  // The first bad key in sorted order is reported.
  (*spec.mutable_env())["RANK"] = "1";
  (*spec.mutable_env())["MASTER_PORT"] = "1";
  EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("env.MASTER_PORT")));
}

TEST(ValidateJobSpecTest, CheckpointDir) {
  JobSpec spec = TrainerJob();
  spec.set_checkpoint_dir("ckpt");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("checkpoint_dir: 'ckpt' is relative")));
  spec.set_checkpoint_dir("/shared/ckpt");
  EXPECT_OK(ValidateAndCheckPaths(spec));

  // Checkpoints on several workers must go to one directory they all read: after a failure
  // every rank restores the newest one.
  spec.mutable_trainer()->set_checkpoint_every(50);
  EXPECT_OK(ValidateAndCheckPaths(spec));
  spec.clear_checkpoint_dir();
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("checkpoint_dir: is required when the trainer "
                                           "checkpoints (trainer.checkpoint_every 50) on up to 2 "
                                           "workers")));
  spec.mutable_workers()->set_min(1);  // One worker: its own work_dir is enough.
  spec.mutable_workers()->set_max(1);
  EXPECT_OK(ValidateAndCheckPaths(spec));
}

TEST(ValidateJobSpecTest, Budget) {
  JobSpec spec = TrainerJob();
  spec.mutable_budget()->set_max_steps(-1);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "budget.max_steps: -1 is out of range; must be >= 0 (0 = no "
                       "limit)"));
  spec.mutable_budget()->set_max_steps(0);
  spec.mutable_budget()->set_max_epochs(-2);
  EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("budget.max_epochs: -2")));

  spec.mutable_budget()->set_max_epochs(0);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("budget: the trainer needs a limit")));
  spec.mutable_budget()->set_max_epochs(3);
  EXPECT_OK(ValidateAndCheckPaths(spec));

  // A command may run without a budget, but not with a negative one.
  JobSpec cmd = CommandJob();
  EXPECT_OK(ValidateJobSpec(cmd));
  cmd.mutable_budget()->set_max_steps(-5);
  EXPECT_THAT(ValidateJobSpec(cmd), StatusIs(kInvalid, HasSubstr("budget.max_steps")));
}

TEST(WithDefaultsTest, FillsRestartPolicyButKeepsExplicitZeros) {
  JobSpec spec = CommandJob();
  const baton::v1::RestartPolicy& p = spec.restart_policy();
  EXPECT_EQ(p.max_infra_restarts(), 10);
  EXPECT_EQ(p.max_user_restarts(), 3);
  EXPECT_EQ(p.max_stall_restarts(), 3);
  EXPECT_EQ(p.backoff_initial().nanos(), 500000000);
  EXPECT_EQ(p.backoff_max().seconds(), 30);
  EXPECT_EQ(p.stall_factor(), 3);
  EXPECT_EQ(p.stall_floor().seconds(), 1);
  EXPECT_EQ(p.stall_floor().nanos(), 500000000);
  EXPECT_EQ(p.stall_unlearned().seconds(), 600);
  EXPECT_EQ(p.report_stall_floor().seconds(), 30);
  EXPECT_FALSE(p.has_output_silence());
  EXPECT_FALSE(p.has_phase_timeouts());
  EXPECT_EQ(p.healthy_steps(), 100);
  EXPECT_EQ(p.healthy_time().seconds(), 600);

  JobSpec zero;
  zero.mutable_restart_policy()->set_max_user_restarts(0);
  zero.mutable_restart_policy()->mutable_backoff_initial()->set_seconds(2);
  zero = WithDefaults(zero);
  EXPECT_EQ(zero.restart_policy().max_user_restarts(), 0);
  EXPECT_EQ(zero.restart_policy().backoff_initial().seconds(), 2);
  EXPECT_EQ(zero.restart_policy().max_infra_restarts(), 10);
}

TEST(WithDefaultsTest, PreflightDefaultsAndExplicitValues) {
  const baton::v1::Preflight d = WithDefaults(JobSpec()).preflight();
  EXPECT_FALSE(d.skip());
  EXPECT_EQ(d.link_window().nanos(), 200000000);
  EXPECT_EQ(d.min_bandwidth_fraction(), 0.5);
  JobSpec given;
  given.mutable_preflight()->set_min_bandwidth_fraction(0);  // never slow: kept
  given.mutable_preflight()->mutable_link_window()->set_seconds(1);
  const baton::v1::Preflight g = WithDefaults(given).preflight();
  EXPECT_EQ(g.min_bandwidth_fraction(), 0);
  EXPECT_EQ(g.link_window().seconds(), 1);
}

TEST(ValidateJobSpecTest, Preflight) {
  JobSpec spec = CommandJob();
  EXPECT_OK(ValidateAndCheckPaths(spec));
  auto* p = spec.mutable_preflight();
  p->mutable_link_window()->set_nanos(10000000);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, "preflight.link_window: 10ms is out of range; must be 50ms..10s"));
  p->mutable_link_window()->set_nanos(0);
  p->mutable_link_window()->set_seconds(2);
  p->set_min_bandwidth_fraction(1.5);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "preflight.min_bandwidth_fraction: 1.5 is out of range; must be 0 "
                       "(never slow)..1"));
  p->set_min_bandwidth_fraction(std::numeric_limits<double>::quiet_NaN());
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("preflight.min_bandwidth_fraction: nan")));
  p->set_min_bandwidth_fraction(0.25);
  p->set_skip(true);
  EXPECT_OK(ValidateAndCheckPaths(spec));
}

TEST(ValidateJobSpecTest, QueueAndPriority) {
  JobSpec spec = CommandJob();
  spec.set_queue("team-a");
  spec.set_priority("high");
  EXPECT_OK(ValidateAndCheckPaths(spec));
  spec.set_priority("-25");
  EXPECT_OK(ValidateAndCheckPaths(spec));
  spec.set_priority("2000000000");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "priority: '2000000000' is invalid; a priority class name (the "
                       "cluster's queue file) or an integer in "
                       "-1000000000..1000000000"));
  spec.set_priority("");
  spec.set_queue("Team A");
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("queue: 'Team A' is invalid; a queue name")));
}

TEST(ValidateJobSpecTest, RestartPolicy) {
  JobSpec spec = CommandJob();
  EXPECT_OK(ValidateAndCheckPaths(spec));
  auto* p = spec.mutable_restart_policy();
  p->set_max_user_restarts(-1);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "restart_policy.max_user_restarts: -1 is out of range; must "
                       "be 0..1000"));
  p->set_max_user_restarts(0);
  p->set_max_infra_restarts(1001);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("restart_policy.max_infra_restarts: 1001")));
  p->set_max_infra_restarts(10);
  p->set_max_stall_restarts(-3);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("restart_policy.max_stall_restarts: -3")));
  p->set_max_stall_restarts(3);
  p->mutable_backoff_max()->set_seconds(7200);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("restart_policy.backoff_max: 2h is out of range")));
  p->mutable_backoff_max()->set_seconds(1);
  p->mutable_backoff_initial()->set_seconds(2);
  p->mutable_backoff_initial()->set_nanos(0);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "restart_policy.backoff_initial: 2s is out of range; must be "
                       "0..restart_policy.backoff_max (1s)"));
  p->mutable_backoff_initial()->set_seconds(0);
  p->set_stall_factor(0.5);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("restart_policy.stall_factor: 0.5 is invalid")));
  p->set_stall_factor(std::numeric_limits<double>::infinity());
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("restart_policy.stall_factor")));
  p->set_stall_factor(2);
  p->mutable_stall_floor()->set_seconds(0);
  p->mutable_stall_floor()->set_nanos(100000000);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, "restart_policy.stall_floor: 100ms is too short; must be >= 1s"));
  p->mutable_stall_floor()->set_seconds(1);
  p->mutable_stall_floor()->set_nanos(0);
  p->mutable_phase_timeouts()->mutable_eval()->set_nanos(500000000);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "restart_policy.phase_timeouts.eval: 500ms is out of range; "
                       "must be 0 (off) or 1s..168h"));
  p->mutable_phase_timeouts()->mutable_eval()->set_nanos(0);  // 0: learned
  p->mutable_phase_timeouts()->mutable_checkpoint()->set_seconds(3600);
  p->mutable_stall_unlearned()->set_seconds(0);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "restart_policy.stall_unlearned: 0 is out of range; must be "
                       "1s..168h"));
  p->mutable_stall_unlearned()->set_seconds(60);
  p->mutable_report_stall_floor()->set_seconds(-1);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("restart_policy.report_stall_floor: -1s is out of")));
  p->mutable_report_stall_floor()->set_seconds(10);
  p->mutable_output_silence()->set_seconds(8 * 24 * 3600);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid, HasSubstr("restart_policy.output_silence: 192h is out of")));
  p->mutable_output_silence()->set_seconds(600);
  p->set_healthy_steps(-1);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "restart_policy.healthy_steps: -1 is out of range; must be "
                       "0..1000000000"));
  p->set_healthy_steps(0);
  p->mutable_healthy_time()->set_seconds(8 * 24 * 3600);
  EXPECT_THAT(ValidateAndCheckPaths(spec),
              StatusIs(kInvalid,
                       "restart_policy.healthy_time: 192h is out of range; must be "
                       "0..168h"));
  p->mutable_healthy_time()->set_seconds(0);
  EXPECT_OK(ValidateAndCheckPaths(spec));
}

TEST(ValidateJobSpecTest, ReportsFirstErrorInFieldOrder) {
  JobSpec spec = TrainerJob();
  spec.mutable_budget()->set_max_steps(-1);
  spec.set_slots_per_worker(0);
  spec.mutable_workers()->set_max(1);
  spec.mutable_trainer()->set_threads(0);
  spec.set_name("X");
  EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("name: ")));
  spec.set_name("x");
  EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("trainer.threads: ")));
  spec.mutable_trainer()->set_threads(1);
  EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("workers.max: ")));
  spec.mutable_workers()->set_max(2);
  EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("slots_per_worker: ")));
  spec.set_slots_per_worker(1);
  EXPECT_THAT(ValidateAndCheckPaths(spec), StatusIs(kInvalid, HasSubstr("budget.max_steps: ")));
}

}  // namespace
}  // namespace baton
