#pragma once

// The one table of the built-in trainer's settings: every TrainerSpec field
// (proto/baton/v1/job.proto), plus the Budget and JobSpec fields baton-trainer takes as
// flags, with its default, the values it allows and its help text. Everything that fills
// in a default, checks a range or describes a setting reads it here:
//   - submit: TrainerSpecWithDefaults / ValidateTrainerSpec (common/spec/trainer_spec.h);
//   - the worker: TrainerArgv (worker/supervisor/trainer_args.h) passes every field as a flag;
//   - baton-trainer: its flags (worker/trainer/trainer_flags.h: each flag's type, default
//     and --help text), their validation, and the defaults of the option structs of its
//     libraries (TrainerOptions, ModelOptions, OptimizerOptions, LrScheduleOptions,
//     TrainStepOptions, LoaderOptions, DataOptions, CheckpointManagerOptions).
// The rules between fields: common/spec/trainer_rules.h.
// Plain C++ and Abseil: the trainer depends on it without protobuf or the coordinator.
//
// Each entry's `name` is both the TrainerSpec field name and the baton-trainer flag name.
// `default_value` is what an unset field means: in a JobSpec (proto3 scalars without
// presence count as unset when zero or empty, fields with presence when absent) and for a
// flag that is not passed (a standalone baton-trainer run; the worker passes every flag).
// `help` is the flag's --help text. The check functions below are the only range checks of
// these fields.
//
// Adding a setting: its entry here (and in TrainerSpecFields or TrainerFlagFields), its
// flag (one line in worker/trainer/trainer_flags.cc) and where baton-trainer keeps it (one
// line in ForEachTableOption, worker/trainer/trainer_options.h, or ForEachFlagOption);
// the table tests name whichever is missing.

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
  absl::string_view help;  // The flag's --help text.
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
  absl::string_view help;
};

// One of a fixed set of names.
struct ChoiceField {
  absl::string_view name;
  absl::string_view default_value;
  absl::Span<const absl::string_view> allowed;
  // A JobSpec must set it: WithDefaults leaves it empty and ValidateTrainerSpec rejects
  // that. default_value then only serves a standalone baton-trainer run.
  bool required;
  absl::string_view help;
  absl::string_view path = {};  // As IntField::path.
};

// Free text (paths); every value is allowed here, the rules between fields are in
// trainer_rules.h.
struct TextField {
  absl::string_view name;
  absl::string_view default_value;
  absl::string_view help;
};

struct BoolField {
  absl::string_view name;
  bool default_value;
  absl::string_view help;
  absl::string_view path = {};  // As IntField::path.
};

// An unsigned 64-bit integer; every value is allowed.
struct Uint64Field {
  absl::string_view name;
  uint64_t default_value;
  absl::string_view help;
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
  absl::string_view help;
};

// ---- the table, in TrainerSpec field order ---------------------------------------------
// One entry per setting, laid out by hand.
// clang-format off

inline constexpr absl::string_view kModels[] = {"mlp", "resnet18", "resnet50", "gpt",
                                                "torchscript"};
inline constexpr ChoiceField kModel{"model", "mlp", kModels, /*required=*/true,
                                    "mlp, resnet18, resnet50, gpt or torchscript."};
inline constexpr absl::string_view kDatasets[] = {"mnist", "cifar10", "image_folder", "tokens",
                                                  "synthetic"};
inline constexpr ChoiceField kDataset{"dataset", "mnist", kDatasets, /*required=*/true,
                                      "mnist, cifar10, image_folder, tokens or synthetic."};
// Required unless the dataset is "synthetic" (trainer_rules.h: CheckDataDir).
inline constexpr TextField kDataDir{"data_dir", "",
                                    "Directory with the dataset's files (not for synthetic)."};
inline constexpr IntField kBatchSize{"batch_size", 64, 1, 65536, "",
                                     "Samples per rank per micro-batch."};
inline constexpr RealField kLr{"lr", 0.05, 0, false, kInfinity, false, "", "Base learning rate."};
inline constexpr RealField kMomentum{"momentum", 0.9, 0, true, 1, false, "0 = plain SGD",
                                     "SGD momentum in [0, 1)."};
inline constexpr Uint64Field kSeed{"seed", 1,
                                   "Seed for initialisation, data order and augmentation."};
inline constexpr int64_t kDefaultHidden[] = {256, 128};
inline constexpr ListField kHidden{"hidden", kDefaultHidden, "layers", 16, 1, 65536,
                                   "Comma-separated MLP hidden layer widths."};
inline constexpr IntField kLogEvery{"log_every", 10, 1, kInt32Max, "",
                                    "Steps between metric lines."};
inline constexpr IntField kThreads{"threads", 1, 1, 256, "", "Intra-op threads."};
// Numerics.
inline constexpr absl::string_view kPrecisions[] = {"fp32", "bf16", "fp16"};
inline constexpr ChoiceField kPrecision{
    "precision", "fp32", kPrecisions, false,
    "fp32, bf16 (autocast) or fp16 (autocast + dynamic loss scaling)."};
inline constexpr IntField kAccumulationSteps{"accumulation_steps", 1, 1, 1024, "",
                                             "Micro-batches per optimizer step."};
inline constexpr RealField kBucketCapMb{"bucket_cap_mb", 25, 0, false, 4096, true, "",
                                        "Gradient all-reduce bucket size in MiB."};
inline constexpr absl::string_view kGradCompressions[] = {"none", "bf16", "fp16"};
inline constexpr ChoiceField kGradCompression{"grad_compression", "none", kGradCompressions,
                                              false, "none, bf16 or fp16 gradient all-reduce."};
inline constexpr RealField kMaxGradNorm{"max_grad_norm", 0, 0, true, kInfinity, false,
                                        "0 = no clipping",
                                        "Clip gradients to this global L2 norm (0 = off)."};
// Optimisation.
inline constexpr absl::string_view kOptimizers[] = {"sgd", "adamw"};
inline constexpr ChoiceField kOptimizer{"optimizer", "sgd", kOptimizers, false, "sgd or adamw."};
inline constexpr RealField kWeightDecay{"weight_decay", 0, 0, true, kInfinity, false, "",
                                        "L2 (sgd) or decoupled (adamw) weight decay."};
// Needs optimizer "sgd" with momentum > 0 (trainer_rules.h: CheckNesterov).
inline constexpr BoolField kNesterov{"nesterov", false, "Nesterov momentum (sgd)."};
inline constexpr RealField kAdamBeta1{"adam_beta1", 0.9, 0, true, 1, false, "", "AdamW beta1."};
inline constexpr RealField kAdamBeta2{"adam_beta2", 0.999, 0, true, 1, false, "",
                                      "AdamW beta2."};
inline constexpr RealField kAdamEps{"adam_eps", 1e-8, 0, true, kInfinity, false, "",
                                    "AdamW epsilon."};
inline constexpr absl::string_view kLrSchedules[] = {"constant", "cosine", "step"};
inline constexpr ChoiceField kLrSchedule{"lr_schedule", "constant", kLrSchedules, false,
                                         "constant, cosine or step."};
inline constexpr IntField kWarmupSteps{"warmup_steps", 0, 0, kInt64Max, "",
                                       "Linear warmup steps."};
// Must also be > 0 for lr_schedule "step" (trainer_rules.h: CheckLrStepSize).
inline constexpr IntField kLrStepSize{"lr_step_size", 0, 0, kInt64Max, "",
                                      "step schedule: steps between decays."};
inline constexpr RealField kLrGamma{"lr_gamma", 0.1, 0, false, kInfinity, false, "",
                                    "step schedule: decay factor."};
inline constexpr RealField kMinLr{"min_lr", 0, 0, true, kInfinity, false, "",
                                  "cosine schedule: final lr."};
inline constexpr IntField kBaseBatch{"base_batch", 0, 0, int64_t{1} << 30,
                                     "0 = no linear scaling",
                                     "Linear scaling rule reference batch (0 = off)."};
// Data.
inline constexpr IntField kLoaderThreads{"loader_threads", 2, 0, 64,
                                         "0 = load on the training thread",
                                         "Background loader threads per rank."};
inline constexpr IntField kPrefetchBatches{"prefetch_batches", 4, 1, 1024, "",
                                           "Batches prepared ahead per rank."};
inline constexpr IntField kImageSize{
    "image_size", 0, 0, 4096, "0 = the dataset's default",
    "Image side (0 = the dataset's default: 224 image_folder, 32 synthetic)."};
// The dataset defaults image_size 0 stands for. WithDefaults fills in the image_folder one.
inline constexpr int64_t kImageFolderImageSize = 224;
inline constexpr int64_t kSyntheticImageSize = 32;
inline constexpr IntField kContextLength{"context_length", 128, 1, 65536, "",
                                         "Sequence length (tokens / gpt)."};
inline constexpr IntField kSyntheticSamples{"synthetic_samples", 8192, 1, int64_t{1} << 31, "",
                                            "synthetic: training samples."};
inline constexpr IntField kNumClasses{"num_classes", 10, 2, 1000000, "", "synthetic: classes."};
// Models.
inline constexpr IntField kGptLayers{"gpt_layers", 4, 1, 256, "", "gpt: layers."};
inline constexpr IntField kGptHeads{"gpt_heads", 4, 1, 256, "", "gpt: attention heads."};
// Must also be divisible by gpt_heads (trainer_rules.h: CheckGptWidth).
inline constexpr IntField kGptWidth{"gpt_width", 256, 1, 65536, "", "gpt: embedding width."};
inline constexpr IntField kVocabSize{"vocab_size", 50304, 2, 1 << 24, "",
                                     "gpt / tokens: vocabulary size."};
// Model "torchscript" only, and then required (trainer_rules.h: CheckTorchscriptPath).
inline constexpr TextField kTorchscriptPath{"torchscript_path", "",
                                            "torchscript: the module file."};
inline constexpr absl::string_view kTasks[] = {"classification", "language_model"};
inline constexpr ChoiceField kTask{"task", "classification", kTasks, false,
                                   "torchscript: classification or language_model."};
// Checkpoints.
inline constexpr IntField kCheckpointEvery{"checkpoint_every", 0, 0, kInt64Max,
                                           "0 = only at the end",
                                           "Steps between checkpoints (0 = only at the end)."};
inline constexpr IntField kEvalEvery{"eval_every", 0, 0, kInt64Max, "0 = only after the last step",
                                     "Steps between evaluations on the test split (0 = only "
                                     "after the last step)."};
inline constexpr IntField kKeepCheckpoints{"keep_checkpoints", 3, 1, 1000, "",
                                           "Step checkpoints to keep."};
inline constexpr IntField kSnapshotEvery{
    "snapshot_every", 0, -1, 1000000,
    "0 = as often as costs <= 1 % of a step (CPU) or 5 % (GPU, ZeRO), -1 = never",
    "Steps between in-memory snapshots of the training state in $BATON_SNAPSHOT_DIR (0 = "
    "every step while a snapshot costs at most 1 % of a step on data-parallel CPU ranks, "
    "which also snapshot their last step when a peer is lost, or 5 % on GPU ranks and "
    "with ZeRO; less often otherwise; -1 = never)."};
// Elastic batch. When > 0: a multiple of every world size, with accumulation_steps 1
// (trainer_rules.h: CheckGlobalBatch).
inline constexpr IntField kGlobalBatch{
    "global_batch", 0, 0, kInt64Max, "0 = batch_size per rank",
    "Samples per optimizer step over all ranks, kept whatever the world size (0 = "
    "--batch_size per rank). --batch_size is then the largest micro-batch; the "
    "accumulation steps are derived, and a resized gang resumes exactly."};
inline constexpr TextField kSampleLog{
    "sample_log", "",
    "Append each step's sample ids to <this>.<rank> (one line: generation step rank "
    "ids), to audit which data was trained on across restarts."};
// Memory. "blocks": models resnet18, resnet50 and gpt only (mlp and torchscript have no
// blocks to checkpoint; trainer_rules.h: CheckActivationCheckpointing).
inline constexpr absl::string_view kActivationCheckpointings[] = {"none", "blocks"};
inline constexpr ChoiceField kActivationCheckpointing{
    "activation_checkpointing", "none", kActivationCheckpointings, false,
    "none, or blocks: recompute each block's activations in backward (resnet18, "
    "resnet50, gpt)."};
// Whether `model` (a kModels name) is built of blocks that activation_checkpointing
// "blocks" can checkpoint.
inline bool HasCheckpointableBlocks(absl::string_view model) {
  return model == "resnet18" || model == "resnet50" || model == "gpt";
}
// ZeRO (TrainerSpec.zero, a ZeroSpec): the flag of each of its fields is "zero_<field>".
// Combinations that cannot work: trainer_rules.h, CheckZeroCombination.
inline constexpr IntField kZeroStage{
    "zero_stage", 0, 0, 2, "",
    "TrainerSpec.zero.stage: 0 (every rank keeps everything), 1 to shard the optimizer "
    "state over the ranks, 2 to shard the gradients too (reduce-scattered bucket by "
    "bucket; not with --grad_compression).",
    "zero.stage"};
inline constexpr BoolField kZeroOffloadOptimizer{
    "zero_offload_optimizer", false,
    "TrainerSpec.zero.offload_optimizer: with --zero_stage 1 or 2, keep the sharded "
    "optimizer state and run its update in pinned host memory when training on GPUs "
    "(no-op on CPU).",
    "zero.offload_optimizer"};
// Pipeline parallelism (TrainerSpec.pipeline, a PipelineSpec): flags "pipeline_<field>".
// The rules between fields: trainer_rules.h, CheckPipeline; the training loop:
// worker/trainer/pipeline_session.h.
inline constexpr IntField kPipelineStages{
    "pipeline_stages", 1, 1, 64, "1 = no pipeline",
    "TrainerSpec.pipeline.stages: ranks per pipeline the model is split over (1 = no "
    "pipeline; the world must be a multiple: stages x data-parallel replicas).",
    "pipeline.stages"};
inline constexpr IntField kPipelineMicroBatches{
    "pipeline_micro_batches", 1, 1, 1024, "",
    "TrainerSpec.pipeline.micro_batches: micro-batches per step and pipeline (>= "
    "--pipeline_stages, divides --batch_size).",
    "pipeline.micro_batches"};
inline constexpr absl::string_view kPipelineSchedules[] = {"gpipe", "1f1b"};
inline constexpr ChoiceField kPipelineSchedule{"pipeline_schedule", "1f1b", kPipelineSchedules,
                                               false,
                                               "TrainerSpec.pipeline.schedule: gpipe or 1f1b.",
                                               "pipeline.schedule"};

// ---- Budget and JobSpec fields baton-trainer takes as flags -------------------------------

// At least one of max_steps and max_epochs must be > 0 (trainer_rules.h: CheckBudget).
inline constexpr IntField kMaxSteps{"max_steps", 0, 0, kInt64Max, "0 = no limit",
                                    "Stop after this many steps (0 = no limit)."};
inline constexpr IntField kMaxEpochs{"max_epochs", 0, 0, kInt32Max, "0 = no limit",
                                     "Stop after this many epochs (0 = no limit)."};
// JobSpec.checkpoint_dir as the worker resolved it; empty = no checkpoints.
inline constexpr TextField kCheckpointDir{"checkpoint_dir", "",
                                          "Checkpoints and final.pt go here (created)."};

// clang-format on

// ---- checks ------------------------------------------------------------------------------
// Each returns OK when `value` is allowed, else INVALID_ARGUMENT
//   "<label>: <value> is out of range; must be <what is allowed>[ (<note>)]"
// (choices: "<label>: '<value>' is not supported; allowed: a, b, c"). `label` names the
// field as the caller's user knows it: "trainer.batch_size" at submit, "--batch_size" in
// baton-trainer (see SpecPath, FlagLabel and Label).

absl::Status Check(const IntField& field, int64_t value, absl::string_view label);
absl::Status Check(const RealField& field, double value, absl::string_view label);
absl::Status Check(const ChoiceField& field, absl::string_view value, absl::string_view label);
// The count first ("<label>: 17 layers is too many; at most 16"), then each element in
// order, labelled "<label>[<index>]".
absl::Status Check(const ListField& field, absl::Span<const int64_t> values,
                   absl::string_view label);

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

// Whose user a message is for: submit's (a JobSpec's field paths, SpecPath) or
// baton-trainer's (its flags, FlagLabel).
enum class Naming { kSpec, kFlags };
template <typename Field>
std::string Label(const Field& field, Naming naming) {
  return naming == Naming::kSpec ? SpecPath(field) : FlagLabel(field);
}

// ---- flag text ---------------------------------------------------------------------------

// The shortest text that parses back to the same double ("0.05", "1e-08").
std::string RealText(double value);
// Comma-separated, e.g. "256,128"; "" for an empty list.
std::string ListText(absl::Span<const int64_t> values);

// ---- the whole table, for code and tests that go over every field -----------------------

using AnyField =
    std::variant<const IntField*, const RealField*, const ChoiceField*, const TextField*,
                 const BoolField*, const Uint64Field*, const ListField*>;

// Every TrainerSpec field's entry, in TrainerSpec field-number order (the Budget and
// JobSpec flags above are not included).
absl::Span<const AnyField> TrainerSpecFields();
// Every baton-trainer contract flag's entry: TrainerSpecFields(), then max_steps,
// max_epochs and checkpoint_dir.
absl::Span<const AnyField> TrainerFlagFields();

absl::string_view FieldName(const AnyField& field);
absl::string_view FieldHelp(const AnyField& field);
// The default as baton-trainer flag text: "64", "0.05", "mlp", "256,128", "false".
std::string DefaultText(const AnyField& field);

}  // namespace baton::trainer_spec
