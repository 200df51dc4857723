#include "common/spec/trainer_rules.h"

#include <functional>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer_spec {
namespace {

// One application of a rule, and the message it gives submit's user and baton-trainer's
// ("" = OK).
struct RuleCase {
  std::string name;
  std::function<absl::Status(Naming)> rule;
  std::string spec;
  std::string flags;
};

void PrintTo(const RuleCase& c, std::ostream* os) { *os << c.name; }

class TrainerRulesTest : public ::testing::TestWithParam<RuleCase> {};

TEST_P(TrainerRulesTest, NamesTheSettingsAsEachSideDoes) {
  const RuleCase& c = GetParam();
  for (const auto& [naming, want] :
       {std::pair(Naming::kSpec, c.spec), std::pair(Naming::kFlags, c.flags)}) {
    SCOPED_TRACE(naming == Naming::kSpec ? "spec" : "flags");
    if (want.empty()) {
      EXPECT_OK(c.rule(naming));
    } else {
      EXPECT_THAT(c.rule(naming), StatusIs(absl::StatusCode::kInvalidArgument, want));
    }
  }
}

PipelineSettings Pipeline(std::function<void(PipelineSettings&)> change) {
  PipelineSettings s{2, 4, "gpt", 4, 3, 64, 0, "none", "fp32", 1, "none"};
  change(s);
  return s;
}

RuleCase PipelineCase(std::string name, std::function<void(PipelineSettings&)> change,
                      std::string spec, std::string flags) {
  return {std::move(name), [=](Naming n) { return CheckPipeline(Pipeline(change), n); },
          std::move(spec), std::move(flags)};
}

INSTANTIATE_TEST_SUITE_P(
    Table, TrainerRulesTest,
    ::testing::Values(
        // data_dir: submit also wants it absolute, and empty for synthetic.
        RuleCase{"data_dir_set", [](Naming n) { return CheckDataDir("mnist", "/d", n); }, "", ""},
        RuleCase{"data_dir_missing", [](Naming n) { return CheckDataDir("cifar10", "", n); },
                 "trainer.data_dir: is required; the absolute directory holding the dataset files",
                 "--data_dir: is required for dataset cifar10; the directory holding its files"},
        RuleCase{"data_dir_relative", [](Naming n) { return CheckDataDir("mnist", "d", n); },
                 "trainer.data_dir: 'd' is relative; must be an absolute path", ""},
        RuleCase{"data_dir_synthetic_set",
                 [](Naming n) { return CheckDataDir("synthetic", "/d", n); },
                 "trainer.data_dir: '/d' is set; must be empty for the synthetic dataset (it "
                 "reads no files)",
                 ""},
        RuleCase{"data_dir_synthetic", [](Naming n) { return CheckDataDir("synthetic", "", n); },
                 "", ""},
        // nesterov.
        RuleCase{"nesterov_sgd", [](Naming n) { return CheckNesterov(true, "sgd", 0.9, n); }, "",
                 ""},
        RuleCase{"nesterov_off", [](Naming n) { return CheckNesterov(false, "adamw", 0, n); }, "",
                 ""},
        RuleCase{"nesterov_no_momentum", [](Naming n) { return CheckNesterov(true, "sgd", 0, n); },
                 "trainer.nesterov: needs optimizer 'sgd' with momentum > 0; unset it or set "
                 "momentum",
                 "--nesterov needs --optimizer=sgd with --momentum > 0"},
        RuleCase{"nesterov_adamw", [](Naming n) { return CheckNesterov(true, "adamw", 0.9, n); },
                 "trainer.nesterov: needs optimizer 'sgd' with momentum > 0; unset it or set "
                 "momentum",
                 "--nesterov needs --optimizer=sgd with --momentum > 0"},
        // lr_step_size.
        RuleCase{"step_schedule_without_step_size",
                 [](Naming n) { return CheckLrStepSize("step", 0, n); },
                 "trainer.lr_step_size: 0 is invalid; must be > 0 for lr_schedule 'step'",
                 "--lr_step_size: 0 is invalid; must be > 0 for lr_schedule 'step'"},
        RuleCase{"step_schedule", [](Naming n) { return CheckLrStepSize("step", 10, n); }, "", ""},
        RuleCase{"cosine_schedule", [](Naming n) { return CheckLrStepSize("cosine", 0, n); }, "",
                 ""},
        // gpt_width.
        RuleCase{"gpt_width_not_divisible", [](Naming n) { return CheckGptWidth(250, 4, n); },
                 "trainer.gpt_width: 250 is not divisible by trainer.gpt_heads (4)",
                 "--gpt_width: 250 is not divisible by --gpt_heads (4)"},
        RuleCase{"gpt_width", [](Naming n) { return CheckGptWidth(256, 4, n); }, "", ""},
        // torchscript_path.
        RuleCase{"torchscript_path_without_torchscript",
                 [](Naming n) { return CheckTorchscriptPath("mlp", "/m.pt", n); },
                 "trainer.torchscript_path: is set; only model 'torchscript' uses it",
                 "--torchscript_path: is set; only model 'torchscript' uses it"},
        RuleCase{"torchscript_path_missing",
                 [](Naming n) { return CheckTorchscriptPath("torchscript", "", n); },
                 "trainer.torchscript_path: '' is invalid; model 'torchscript' needs the "
                 "absolute path of a module saved by torch.jit.script(m).save()",
                 "--torchscript_path: '' is invalid; model 'torchscript' needs the absolute path "
                 "of a module saved by torch.jit.script(m).save()"},
        RuleCase{"torchscript_path",
                 [](Naming n) { return CheckTorchscriptPath("torchscript", "/m.pt", n); }, "", ""},
        // activation_checkpointing.
        RuleCase{"blocks_without_blocks",
                 [](Naming n) { return CheckActivationCheckpointing("blocks", "mlp", n); },
                 "trainer.activation_checkpointing: 'blocks' is not supported by model 'mlp', "
                 "which has no blocks; 'blocks' needs resnet18, resnet50 or gpt, else use 'none'",
                 "--activation_checkpointing: 'blocks' is not supported by --model=mlp, which "
                 "has no blocks; use resnet18, resnet50 or gpt, or 'none'"},
        RuleCase{"blocks",
                 [](Naming n) { return CheckActivationCheckpointing("blocks", "gpt", n); }, "", ""},
        RuleCase{"none", [](Naming n) { return CheckActivationCheckpointing("none", "mlp", n); },
                 "", ""},
        // Which models fit which data.
        RuleCase{
            "language_model_on_images",
            [](Naming n) { return CheckModelFitsDataset("gpt", "classification", "mnist", n); },
            "trainer.dataset: 'mnist' holds images; the language model needs 'tokens' or "
            "'synthetic'",
            "--dataset: 'mnist' holds images; the language model needs 'tokens' or "
            "'synthetic'"},
        RuleCase{"classifier_on_tokens",
                 [](Naming n) {
                   return CheckModelFitsDataset("torchscript", "classification", "tokens", n);
                 },
                 "trainer.model: 'torchscript' is a classifier; the tokens dataset needs 'gpt' "
                 "or 'torchscript' with task 'language_model'",
                 "--model: 'torchscript' is a classifier; the tokens dataset needs 'gpt' or "
                 "'torchscript' with task 'language_model'"},
        RuleCase{"torchscript_language_model_on_tokens",
                 [](Naming n) {
                   return CheckModelFitsDataset("torchscript", "language_model", "tokens", n);
                 },
                 "", ""},
        RuleCase{
            "gpt_on_synthetic",
            [](Naming n) { return CheckModelFitsDataset("gpt", "classification", "synthetic", n); },
            "", ""},
        // global_batch: reported on a different field by each side.
        RuleCase{"global_batch_with_accumulation",
                 [](Naming n) { return CheckGlobalBatch(64, 2, n); },
                 "trainer.accumulation_steps: 2 is set with trainer.global_batch, which derives "
                 "the accumulation steps per world size; unset it",
                 "--global_batch derives the accumulation steps per world size; leave "
                 "--accumulation_steps at 1"},
        RuleCase{"global_batch", [](Naming n) { return CheckGlobalBatch(64, 1, n); }, "", ""},
        RuleCase{"accumulation_without_global_batch",
                 [](Naming n) { return CheckGlobalBatch(0, 4, n); }, "", ""},
        // ZeRO.
        RuleCase{"offload_at_stage_0",
                 [](Naming n) { return CheckZeroCombination(0, true, "none", n); },
                 "trainer.zero.offload_optimizer: true needs trainer.zero.stage 1 or 2 (the "
                 "sharded optimizer state is what is offloaded); it is 0",
                 "--zero_offload_optimizer: true needs --zero_stage 1 or 2 (the sharded "
                 "optimizer state is what is offloaded); it is 0"},
        RuleCase{"stage_2_compressed",
                 [](Naming n) { return CheckZeroCombination(2, false, "bf16", n); },
                 "trainer.zero.stage: 2 cannot be combined with trainer.grad_compression=bf16 "
                 "(stage 2 reduce-scatters full-width gradients); use stage 1, or "
                 "trainer.grad_compression=none",
                 "--zero_stage: 2 cannot be combined with --grad_compression=bf16 (stage 2 "
                 "reduce-scatters full-width gradients); use stage 1, or --grad_compression=none"},
        RuleCase{"stage_1_compressed_offloaded",
                 [](Naming n) { return CheckZeroCombination(1, true, "fp16", n); }, "", ""},
        RuleCase{"stage_2_unset_compression",
                 [](Naming n) { return CheckZeroCombination(2, true, "", n); }, "", ""},
        // Pipelines (the base: 2 stages of a 4-layer gpt, 4 micro-batches of 64).
        PipelineCase(
            "pipeline", [](PipelineSettings&) {}, "", ""),
        PipelineCase(
            "no_pipeline",
            [](PipelineSettings& s) {
              s.stages = 1;
              s.micro_batches = 1;
              s.precision = "fp16";
            },
            "", ""),
        PipelineCase(
            "too_few_micro_batches", [](PipelineSettings& s) { s.micro_batches = 1; },
            "trainer.pipeline.micro_batches: 1 is fewer than the 2 stages; must be >= "
            "trainer.pipeline.stages",
            "--pipeline_micro_batches: 1 is fewer than the 2 stages; must be >= "
            "--pipeline_stages"),
        PipelineCase(
            "gpt_layers_not_divisible", [](PipelineSettings& s) { s.gpt_layers = 5; },
            "trainer.pipeline.stages: 2 does not divide trainer.gpt_layers 5; must "
            "divide it",
            "--pipeline_stages: 2 does not divide --gpt_layers 5; must divide it"),
        PipelineCase(
            "mlp_too_shallow",
            [](PipelineSettings& s) {
              s.model = "mlp";
              s.mlp_layers = 1;
            },
            "trainer.pipeline.stages: 2 stages for an mlp of 1 layers; must be at most "
            "its layers (hidden widths + 1)",
            "--pipeline_stages: 2 stages for an mlp of 1 layers; must be at most its "
            "layers (hidden widths + 1)"),
        PipelineCase(
            "resnet", [](PipelineSettings& s) { s.model = "resnet18"; },
            "trainer.pipeline.stages: model 'resnet18' cannot be split into stages; "
            "allowed with models gpt and mlp",
            "--pipeline_stages: model 'resnet18' cannot be split into stages; allowed "
            "with models gpt and mlp"),
        PipelineCase(
            "batch_not_divisible", [](PipelineSettings& s) { s.batch_size = 6; },
            "trainer.pipeline.micro_batches: 4 does not divide trainer.batch_size 6; "
            "must divide it",
            "--pipeline_micro_batches: 4 does not divide --batch_size 6; must divide it"),
        PipelineCase(
            "zero", [](PipelineSettings& s) { s.zero_stage = 1; },
            "trainer.pipeline.stages: pipeline parallelism is not supported with "
            "trainer.zero.stage 1; allowed with trainer.zero.stage 0",
            "--pipeline_stages: pipeline parallelism is not supported with --zero_stage "
            "1; allowed with --zero_stage 0"),
        PipelineCase(
            "activation_checkpointing",
            [](PipelineSettings& s) { s.activation_checkpointing = "blocks"; },
            "trainer.pipeline.stages: pipeline parallelism is not supported with "
            "trainer.activation_checkpointing 'blocks'; allowed with 'none'",
            "--pipeline_stages: pipeline parallelism is not supported with "
            "--activation_checkpointing 'blocks'; allowed with 'none'"),
        PipelineCase(
            "fp16", [](PipelineSettings& s) { s.precision = "fp16"; },
            "trainer.precision: 'fp16' is not supported with pipeline parallelism "
            "(trainer.pipeline.stages 2); allowed: fp32",
            "--precision: 'fp16' is not supported with pipeline parallelism "
            "(--pipeline_stages 2); allowed: fp32"),
        PipelineCase(
            "accumulation", [](PipelineSettings& s) { s.accumulation_steps = 2; },
            "trainer.accumulation_steps: 2 is not supported with pipeline parallelism "
            "(trainer.pipeline.stages 2); allowed: 1 (a pipeline accumulates over its "
            "trainer.pipeline.micro_batches instead)",
            "--accumulation_steps: 2 is not supported with pipeline parallelism "
            "(--pipeline_stages 2); allowed: 1 (a pipeline accumulates over its "
            "--pipeline_micro_batches instead)"),
        PipelineCase(
            "compression", [](PipelineSettings& s) { s.grad_compression = "fp16"; },
            "trainer.grad_compression: 'fp16' is not supported with pipeline "
            "parallelism (trainer.pipeline.stages 2); allowed: none",
            "--grad_compression: 'fp16' is not supported with pipeline parallelism "
            "(--pipeline_stages 2); allowed: none"),
        PipelineCase(
            "unset_precision_and_compression",
            [](PipelineSettings& s) {
              s.precision = "";
              s.grad_compression = "";
            },
            "", ""),
        // sample_log.
        RuleCase{"sample_log_with_pipeline",
                 [](Naming n) { return CheckSampleLog("/tmp/samples", 2, n); },
                 "trainer.sample_log is not supported with trainer.pipeline.stages=2",
                 "--sample_log is not supported with --pipeline_stages=2"},
        RuleCase{"sample_log", [](Naming n) { return CheckSampleLog("/tmp/samples", 1, n); }, "",
                 ""},
        // The budget.
        RuleCase{"no_budget", [](Naming n) { return CheckBudget(0, 0, n); },
                 "budget: the trainer needs a limit; set budget.max_steps or budget.max_epochs "
                 "to a value > 0",
                 "one of --max_steps and --max_epochs must be > 0"},
        RuleCase{"steps", [](Naming n) { return CheckBudget(10, 0, n); }, "", ""},
        RuleCase{"epochs", [](Naming n) { return CheckBudget(0, 1, n); }, "", ""}),
    [](const ::testing::TestParamInfo<RuleCase>& info) { return info.param.name; });

TEST(IsLanguageModelTest, GptAndTorchscriptLanguageModels) {
  EXPECT_TRUE(IsLanguageModel("gpt", "classification"));
  EXPECT_TRUE(IsLanguageModel("torchscript", "language_model"));
  EXPECT_FALSE(IsLanguageModel("torchscript", "classification"));
  EXPECT_FALSE(IsLanguageModel("mlp", "language_model"));
}

}  // namespace
}  // namespace baton::trainer_spec
