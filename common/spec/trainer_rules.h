#pragma once

// The rules between the built-in trainer's settings: which values, each allowed by its own
// entry in the table (common/spec/trainer_spec_defaults.h), cannot be used together. Submit
// (ValidateTrainerSpec, ValidateJobSpec) and baton-trainer (ValidateTrainerOptions,
// OptionsFromFlags) both call these functions, so each rule is written once. Plain C++ and
// Abseil, like the table.
//
// Each rule returns OK, or INVALID_ARGUMENT "<setting>: <what is wrong>" naming the settings
// as `naming` says (Naming::kSpec "trainer.batch_size", Naming::kFlags "--batch_size"). The
// arguments must each have passed their own table check. Where submit's and baton-trainer's
// messages have always been worded differently, both wordings are kept (the rule says so);
// tests and scripts match them. Who applies which rule:
//
//   rule                          submit                 baton-trainer
//   CheckDataDir                  ValidateTrainerSpec    OptionsFromFlags (a laxer form)
//   CheckNesterov                 ValidateTrainerSpec    ValidateTrainerOptions
//   CheckLrStepSize               ValidateTrainerSpec    ValidateTrainerOptions
//   CheckGptWidth                 ValidateTrainerSpec    - (the gpt model refuses it)
//   CheckTorchscriptPath          ValidateTrainerSpec    - (loading the module fails)
//   CheckActivationCheckpointing  ValidateTrainerSpec    ValidateTrainerOptions
//   CheckModelFitsDataset         ValidateTrainerSpec    - (the data and model disagree)
//   CheckGlobalBatch              ValidateJobSpec        ValidateTrainerOptions
//   CheckZeroCombination          ValidateTrainerSpec    ValidateTrainerOptions
//   CheckPipeline                 ValidateTrainerSpec    ValidateTrainerOptions
//   CheckSampleLog                ValidateTrainerSpec    ValidateTrainerOptions
//   CheckBudget                   ValidateJobSpec        ValidateTrainerOptions
//
// The rules against the world sizes a job may run at (global_batch a multiple of each,
// pipeline stages dividing each) need the JobSpec's workers: ValidateJobSpec
// (common/spec/job_spec.h), with the split itself in common/spec/global_batch.h.

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "common/spec/trainer_spec_defaults.h"

namespace baton::trainer_spec {

// Whether `model` with `task` is a language model, which trains on token sequences:
// "gpt", or "torchscript" with task "language_model".
bool IsLanguageModel(absl::string_view model, absl::string_view task);

// data_dir: required unless the dataset is "synthetic". With kSpec also: empty for
// "synthetic" (it reads no files), else an absolute path (the trainer runs in a directory
// of the worker's choosing). Worded differently for kSpec ("...: is required; the absolute
// directory holding the dataset files") and kFlags ("--data_dir: is required for dataset
// <dataset>; the directory holding its files").
absl::Status CheckDataDir(absl::string_view dataset, absl::string_view data_dir, Naming naming);

// nesterov needs optimizer "sgd" with momentum > 0. Worded differently for kSpec
// ("trainer.nesterov: needs optimizer 'sgd' with momentum > 0; unset it or set momentum")
// and kFlags ("--nesterov needs --optimizer=sgd with --momentum > 0").
absl::Status CheckNesterov(bool nesterov, absl::string_view optimizer, double momentum,
                           Naming naming);

// lr_schedule "step" needs lr_step_size > 0.
absl::Status CheckLrStepSize(absl::string_view lr_schedule, int64_t lr_step_size, Naming naming);

// gpt_width must be divisible by gpt_heads.
absl::Status CheckGptWidth(int64_t gpt_width, int64_t gpt_heads, Naming naming);

// torchscript_path: model "torchscript" only, and then an absolute path.
absl::Status CheckTorchscriptPath(absl::string_view model, absl::string_view torchscript_path,
                                  Naming naming);

// activation_checkpointing "blocks" needs a model with blocks (HasCheckpointableBlocks).
// Worded differently for kSpec ("... by model 'mlp', which has no blocks; 'blocks' needs
// resnet18, resnet50 or gpt, else use 'none'") and kFlags ("... by --model=mlp, which has no
// blocks; use resnet18, resnet50 or gpt, or 'none'").
absl::Status CheckActivationCheckpointing(absl::string_view activation_checkpointing,
                                          absl::string_view model, Naming naming);

// A language model (IsLanguageModel) trains on "tokens" or "synthetic" data (reported on
// dataset), and the "tokens" dataset feeds language models only (reported on model).
absl::Status CheckModelFitsDataset(absl::string_view model, absl::string_view task,
                                   absl::string_view dataset, Naming naming);

// global_batch > 0 derives the accumulation steps per world size, so accumulation_steps
// must be 1. Reported differently: kSpec on trainer.accumulation_steps ("2 is set with
// trainer.global_batch, ...; unset it"), kFlags on --global_batch ("... leave
// --accumulation_steps at 1").
absl::Status CheckGlobalBatch(int64_t global_batch, int64_t accumulation_steps, Naming naming);

// ZeRO: offload_optimizer needs zero stage 1 or 2 (there is no sharded optimizer state to
// offload at stage 0: "<offload>: true needs <stage> 1 or 2 ..."), and stage 2 refuses
// gradient compression ("<stage>: 2 cannot be combined with <grad_compression>=bf16 ...":
// stage 2 reduce-scatters full-width gradients). grad_compression "" counts as "none".
absl::Status CheckZeroCombination(int64_t stage, bool offload_optimizer,
                                  absl::string_view grad_compression, Naming naming);

// Pipeline parallelism (PipelineSpec in job.proto), with stages > 1: micro_batches >=
// stages; model "gpt" with gpt_layers divisible by stages, or "mlp" with at least `stages`
// layers (mlp_layers = hidden widths + 1); batch_size divisible by micro_batches;
// zero_stage 0; activation_checkpointing "none"; and what the pipeline training loop does
// not support: precision "fp32" (or ""), accumulation_steps 1 (the micro-batches are the
// pipeline's), grad_compression "none" (or "").
struct PipelineSettings {
  int64_t stages;
  int64_t micro_batches;
  absl::string_view model;
  int64_t gpt_layers;
  int64_t mlp_layers;
  int64_t batch_size;
  int64_t zero_stage;
  absl::string_view activation_checkpointing;
  absl::string_view precision;
  int64_t accumulation_steps;
  absl::string_view grad_compression;
};
absl::Status CheckPipeline(const PipelineSettings& s, Naming naming);

// sample_log is not supported with pipeline stages > 1.
absl::Status CheckSampleLog(absl::string_view sample_log, int64_t pipeline_stages, Naming naming);

// The trainer needs a limit: max_steps or max_epochs > 0. Worded differently for kSpec
// ("budget: the trainer needs a limit; set budget.max_steps or budget.max_epochs to a
// value > 0") and kFlags ("one of --max_steps and --max_epochs must be > 0").
absl::Status CheckBudget(int64_t max_steps, int64_t max_epochs, Naming naming);

}  // namespace baton::trainer_spec
