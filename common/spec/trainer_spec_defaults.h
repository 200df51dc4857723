#pragma once

// The one table of the built-in trainer's settings: every TrainerSpec field
// (proto/baton/v1/job.proto), plus the Budget and JobSpec fields baton-trainer takes as
// flags, with its default and the values it allows. Everything that fills in a default or
// checks a range reads it here:
//   - submit: TrainerSpecWithDefaults / ValidateTrainerSpec (common/spec/trainer_spec.h);
//   - the worker: TrainerArgv (worker/supervisor/trainer_args.h) passes every field as a flag;
//   - baton-trainer: its flag defaults and flag validation (worker/trainer/trainer_flags.h),
//     and the defaults of the option structs of its libraries (TrainerOptions, ModelOptions,
//     OptimizerOptions, LrScheduleOptions, TrainStepOptions, LoaderOptions, DataOptions,
//     CheckpointManagerOptions).
// Plain C++ and Abseil: the trainer depends on it without protobuf or the coordinator.
//
// Each entry's `name` is both the TrainerSpec field name and the baton-trainer flag name.
// `default_value` is what an unset field means: in a JobSpec (proto3 scalars without
// presence count as unset when zero or empty, fields with presence when absent) and for a
// flag that is not passed (a standalone baton-trainer run; the worker passes every flag).
// The check functions below are the only range checks of these fields.

#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <variant>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace baton::trainer_spec {

inline constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
inline constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();
inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

// An integer; allowed: min..max (inclusive).
struct IntField {
  absl::string_view name;
  int64_t default_value;
  int64_t min;
  int64_t max;
  absl::string_view note;  // What special values mean (e.g. "0 = no limit"); may be empty.
  // The field path under "trainer." when it is not `name` (a field of a nested message:
  // "zero.stage" for the flag "zero_stage"); empty otherwise.
  absl::string_view path = {};
};

// A real number; allowed: finite values between lo and hi, each bound included when its
// `_closed` is true. hi = kInfinity: no upper bound.
struct RealField {
  absl::string_view name;
  double default_value;
  double lo;
  bool lo_closed;
  double hi;
  bool hi_closed;
  absl::string_view note;
};

// One of a fixed set of names.
struct ChoiceField {
  absl::string_view name;
  absl::string_view default_value;
  absl::Span<const absl::string_view> allowed;
  // A JobSpec must set it: WithDefaults leaves it empty and ValidateTrainerSpec rejects
  // that. default_value then only serves a standalone baton-trainer run.
  bool required;
  absl::string_view path = {};  // As IntField::path.
};

// Free text (paths); every value is allowed here, rules between fields live with the
// validators.
struct TextField {
  absl::string_view name;
  absl::string_view default_value;
};

struct BoolField {
  absl::string_view name;
  bool default_value;
  absl::string_view path = {};  // As IntField::path.
};

// An unsigned 64-bit integer; every value is allowed.
struct Uint64Field {
  absl::string_view name;
  uint64_t default_value;
};

// A list of integers (flag text: comma-separated, e.g. "256,128"); allowed: at most
// max_count elements, each min..max.
struct ListField {
  absl::string_view name;
  absl::Span<const int64_t> default_value;
  absl::string_view unit;  // What an element is, plural, for messages: "layers".
  int max_count;
  int64_t min;
  int64_t max;
};

// ---- the table, in TrainerSpec field order ---------------------------------------------

inline constexpr absl::string_view kModels[] = {"mlp", "resnet18", "resnet50", "gpt",
                                                "torchscript"};
inline constexpr ChoiceField kModel{"model", "mlp", kModels, /*required=*/true};
inline constexpr absl::string_view kDatasets[] = {"mnist", "cifar10", "image_folder", "tokens",
                                                  "synthetic"};
inline constexpr ChoiceField kDataset{"dataset", "mnist", kDatasets, /*required=*/true};
// Required unless the dataset is "synthetic" (which must leave it empty).
inline constexpr TextField kDataDir{"data_dir", ""};
inline constexpr IntField kBatchSize{"batch_size", 64, 1, 65536, ""};
inline constexpr RealField kLr{"lr", 0.05, 0, false, kInfinity, false, ""};
inline constexpr RealField kMomentum{"momentum", 0.9, 0, true, 1, false, "0 = plain SGD"};
inline constexpr Uint64Field kSeed{"seed", 1};
inline constexpr int64_t kDefaultHidden[] = {256, 128};
inline constexpr ListField kHidden{"hidden", kDefaultHidden, "layers", 16, 1, 65536};
inline constexpr IntField kLogEvery{"log_every", 10, 1, kInt32Max, ""};
inline constexpr IntField kThreads{"threads", 1, 1, 256, ""};
// Numerics.
inline constexpr absl::string_view kPrecisions[] = {"fp32", "bf16", "fp16"};
inline constexpr ChoiceField kPrecision{"precision", "fp32", kPrecisions, false};
inline constexpr IntField kAccumulationSteps{"accumulation_steps", 1, 1, 1024, ""};
inline constexpr RealField kBucketCapMb{"bucket_cap_mb", 25, 0, false, 4096, true, ""};
inline constexpr absl::string_view kGradCompressions[] = {"none", "bf16", "fp16"};
inline constexpr ChoiceField kGradCompression{"grad_compression", "none", kGradCompressions,
                                              false};
inline constexpr RealField kMaxGradNorm{"max_grad_norm", 0,         0, true, kInfinity, false,
                                        "0 = no clipping"};
// Optimisation.
inline constexpr absl::string_view kOptimizers[] = {"sgd", "adamw"};
inline constexpr ChoiceField kOptimizer{"optimizer", "sgd", kOptimizers, false};
inline constexpr RealField kWeightDecay{"weight_decay", 0, 0, true, kInfinity, false, ""};
// Needs optimizer "sgd" with momentum > 0.
inline constexpr BoolField kNesterov{"nesterov", false};
inline constexpr RealField kAdamBeta1{"adam_beta1", 0.9, 0, true, 1, false, ""};
inline constexpr RealField kAdamBeta2{"adam_beta2", 0.999, 0, true, 1, false, ""};
inline constexpr RealField kAdamEps{"adam_eps", 1e-8, 0, true, kInfinity, false, ""};
inline constexpr absl::string_view kLrSchedules[] = {"constant", "cosine", "step"};
inline constexpr ChoiceField kLrSchedule{"lr_schedule", "constant", kLrSchedules, false};
inline constexpr IntField kWarmupSteps{"warmup_steps", 0, 0, kInt64Max, ""};
// Must also be > 0 for lr_schedule "step".
inline constexpr IntField kLrStepSize{"lr_step_size", 0, 0, kInt64Max, ""};
inline constexpr RealField kLrGamma{"lr_gamma", 0.1, 0, false, kInfinity, false, ""};
inline constexpr RealField kMinLr{"min_lr", 0, 0, true, kInfinity, false, ""};
inline constexpr IntField kBaseBatch{"base_batch", 0, 0, int64_t{1} << 30,
                                     "0 = no linear scaling"};
// Data.
inline constexpr IntField kLoaderThreads{"loader_threads", 2, 0, 64,
                                         "0 = load on the training thread"};
inline constexpr IntField kPrefetchBatches{"prefetch_batches", 4, 1, 1024, ""};
inline constexpr IntField kImageSize{"image_size", 0, 0, 4096, "0 = the dataset's default"};
// The dataset defaults image_size 0 stands for. WithDefaults fills in the image_folder one.
inline constexpr int64_t kImageFolderImageSize = 224;
inline constexpr int64_t kSyntheticImageSize = 32;
inline constexpr IntField kContextLength{"context_length", 128, 1, 65536, ""};
inline constexpr IntField kSyntheticSamples{"synthetic_samples", 8192, 1, int64_t{1} << 31, ""};
inline constexpr IntField kNumClasses{"num_classes", 10, 2, 1000000, ""};
// Models.
inline constexpr IntField kGptLayers{"gpt_layers", 4, 1, 256, ""};
inline constexpr IntField kGptHeads{"gpt_heads", 4, 1, 256, ""};
// Must also be divisible by gpt_heads.
inline constexpr IntField kGptWidth{"gpt_width", 256, 1, 65536, ""};
inline constexpr IntField kVocabSize{"vocab_size", 50304, 2, 1 << 24, ""};
// Model "torchscript" only, and then required.
inline constexpr TextField kTorchscriptPath{"torchscript_path", ""};
inline constexpr absl::string_view kTasks[] = {"classification", "language_model"};
inline constexpr ChoiceField kTask{"task", "classification", kTasks, false};
// Checkpoints.
inline constexpr IntField kCheckpointEvery{"checkpoint_every", 0, 0, kInt64Max,
                                           "0 = only at the end"};
inline constexpr IntField kKeepCheckpoints{"keep_checkpoints", 3, 1, 1000, ""};
// Elastic batch. When > 0: a multiple of every world size, with accumulation_steps 1.
inline constexpr IntField kGlobalBatch{"global_batch", 0, 0, kInt64Max,
                                       "0 = batch_size per rank"};
inline constexpr TextField kSampleLog{"sample_log", ""};
// Memory. "blocks": models resnet18, resnet50 and gpt only (mlp and torchscript have no
// blocks to checkpoint).
inline constexpr absl::string_view kActivationCheckpointings[] = {"none", "blocks"};
inline constexpr ChoiceField kActivationCheckpointing{"activation_checkpointing", "none",
                                                      kActivationCheckpointings, false};
// Whether `model` (a kModels name) is built of blocks that activation_checkpointing
// "blocks" can checkpoint.
inline bool HasCheckpointableBlocks(absl::string_view model) {
  return model == "resnet18" || model == "resnet50" || model == "gpt";
}
// ZeRO (TrainerSpec.zero, a ZeroSpec): the flag of each of its fields is "zero_<field>".
// Combinations that cannot work: CheckZeroCombination.
inline constexpr IntField kZeroStage{"zero_stage", 0, 0, 2, "", "zero.stage"};
inline constexpr BoolField kZeroOffloadOptimizer{"zero_offload_optimizer", false,
                                                 "zero.offload_optimizer"};
// Pipeline parallelism (TrainerSpec.pipeline, a PipelineSpec): flags "pipeline_<field>".
// The rules between fields live with the validators (CheckPipeline); the training loop:
// worker/trainer/pipeline_session.h.
inline constexpr IntField kPipelineStages{"pipeline_stages", 1, 1, 64, "1 = no pipeline",
                                          "pipeline.stages"};
inline constexpr IntField kPipelineMicroBatches{"pipeline_micro_batches", 1, 1, 1024, "",
                                                "pipeline.micro_batches"};
inline constexpr absl::string_view kPipelineSchedules[] = {"gpipe", "1f1b"};
inline constexpr ChoiceField kPipelineSchedule{"pipeline_schedule", "1f1b", kPipelineSchedules,
                                               false, "pipeline.schedule"};

// ---- Budget and JobSpec fields baton-trainer takes as flags -------------------------------

// At least one of max_steps and max_epochs must be > 0.
inline constexpr IntField kMaxSteps{"max_steps", 0, 0, kInt64Max, "0 = no limit"};
inline constexpr IntField kMaxEpochs{"max_epochs", 0, 0, kInt32Max, "0 = no limit"};
// JobSpec.checkpoint_dir as the worker resolved it; empty = no checkpoints.
inline constexpr TextField kCheckpointDir{"checkpoint_dir", ""};

// ---- checks ------------------------------------------------------------------------------
// Each returns OK when `value` is allowed, else INVALID_ARGUMENT
//   "<label>: <value> is out of range; must be <what is allowed>[ (<note>)]"
// (choices: "<label>: '<value>' is not supported; allowed: a, b, c"). `label` names the
// field as the caller's user knows it: "trainer.batch_size" at submit, "--batch_size" in
// baton-trainer (see SpecPath and FlagLabel).

absl::Status Check(const IntField& field, int64_t value, absl::string_view label);
absl::Status Check(const RealField& field, double value, absl::string_view label);
absl::Status Check(const ChoiceField& field, absl::string_view value, absl::string_view label);
// The count first ("<label>: 17 layers is too many; at most 16"), then each element in
// order, labelled "<label>[<index>]".
absl::Status Check(const ListField& field, absl::Span<const int64_t> values,
                   absl::string_view label);
// OK unless the ZeRO settings cannot work together with the gradient compression, else
// INVALID_ARGUMENT naming the field: "<offload_label>: true needs <stage_label> 1 or 2 ..."
// (there is no sharded optimizer state to offload at stage 0), or "<stage_label>: 2 cannot
// be combined with <compression_label>=bf16 ..." (stage 2 reduce-scatters full-width
// gradients). `stage` and `grad_compression` must have passed their Checks.
absl::Status CheckZeroCombination(int64_t stage, bool offload_optimizer,
                                  absl::string_view grad_compression,
                                  absl::string_view stage_label, absl::string_view offload_label,
                                  absl::string_view compression_label);

// The rules between pipeline settings and the rest (PipelineSpec in job.proto), once each
// passed its own Check: with stages > 1, micro_batches >= stages; model "gpt" with
// gpt_layers divisible by stages, or "mlp" with at least `stages` layers (mlp_layers =
// hidden widths + 1); batch_size divisible by micro_batches; zero_stage 0;
// activation_checkpointing "none"; and what the pipeline training loop does not support:
// precision "fp32" (or ""), accumulation_steps 1 (the micro-batches are the pipeline's),
// grad_compression "none" (or ""). INVALID_ARGUMENT "<label of the field>: ..."; `labels`
// names each setting as the caller's user knows it (SpecPath or FlagLabel).
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
struct PipelineLabels {
  std::string stages, micro_batches, gpt_layers, batch_size, zero_stage, activation_checkpointing,
      precision, accumulation_steps, grad_compression;
};
absl::Status CheckPipeline(const PipelineSettings& s, const PipelineLabels& labels);

// "trainer.<name>" (or "trainer.<path>" for a nested field): the field path of a TrainerSpec
// entry in a JobSpec.
template <typename Field>
std::string SpecPath(const Field& field) {
  if constexpr (std::is_same_v<Field, IntField> || std::is_same_v<Field, BoolField> ||
                std::is_same_v<Field, ChoiceField>) {
    if (!field.path.empty()) {
      return std::string("trainer.").append(field.path.data(), field.path.size());
    }
  }
  return std::string("trainer.").append(field.name.data(), field.name.size());
}
// "--<name>".
template <typename Field>
std::string FlagLabel(const Field& field) {
  return std::string("--").append(field.name.data(), field.name.size());
}

// ---- flag text ---------------------------------------------------------------------------

// The shortest text that parses back to the same double ("0.05", "1e-08").
std::string RealText(double value);
// Comma-separated, e.g. "256,128"; "" for an empty list.
std::string ListText(absl::Span<const int64_t> values);

// ---- the whole table, for code and tests that go over every field -----------------------

using AnyField = std::variant<const IntField*, const RealField*, const ChoiceField*,
                              const TextField*, const BoolField*, const Uint64Field*,
                              const ListField*>;

// Every TrainerSpec field's entry, in TrainerSpec field-number order (the Budget and
// JobSpec flags above are not included).
absl::Span<const AnyField> TrainerSpecFields();

absl::string_view FieldName(const AnyField& field);
// The default as baton-trainer flag text: "64", "0.05", "mlp", "256,128", "false".
std::string DefaultText(const AnyField& field);

}  // namespace baton::trainer_spec
