#include "worker/trainer/trainer_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"
#include "worker/trainer/device/precision.h"
#include "worker/trainer/models/mlp.h"
#include "worker/trainer/step/gradient_reducer.h"

namespace ts = ::baton::trainer_spec;

// Contract flags: one per TrainerSpec field, same names; defaults from the table.
ABSL_FLAG(std::string, model, std::string(ts::kModel.default_value),
          "mlp, resnet18, resnet50, gpt or torchscript.");
ABSL_FLAG(std::string, dataset, std::string(ts::kDataset.default_value),
          "mnist, cifar10, image_folder, tokens or synthetic.");
ABSL_FLAG(std::string, data_dir, std::string(ts::kDataDir.default_value),
          "Directory with the dataset's files (not for synthetic).");
ABSL_FLAG(int64_t, batch_size, ts::kBatchSize.default_value, "Samples per rank per micro-batch.");
ABSL_FLAG(double, lr, ts::kLr.default_value, "Base learning rate.");
ABSL_FLAG(double, momentum, ts::kMomentum.default_value, "SGD momentum in [0, 1).");
ABSL_FLAG(uint64_t, seed, ts::kSeed.default_value,
          "Seed for initialisation, data order and augmentation.");
ABSL_FLAG(std::string, hidden, ts::ListText(ts::kHidden.default_value),
          "Comma-separated MLP hidden layer widths.");
ABSL_FLAG(int64_t, log_every, ts::kLogEvery.default_value, "Steps between metric lines.");
ABSL_FLAG(int32_t, threads, ts::kThreads.default_value, "Intra-op threads.");
ABSL_FLAG(std::string, precision, std::string(ts::kPrecision.default_value),
          "fp32, bf16 (autocast) or fp16 (autocast + dynamic loss scaling).");
ABSL_FLAG(int64_t, accumulation_steps, ts::kAccumulationSteps.default_value,
          "Micro-batches per optimizer step.");
ABSL_FLAG(double, bucket_cap_mb, ts::kBucketCapMb.default_value,
          "Gradient all-reduce bucket size in MiB.");
ABSL_FLAG(std::string, grad_compression, std::string(ts::kGradCompression.default_value),
          "none, bf16 or fp16 gradient all-reduce.");
ABSL_FLAG(double, max_grad_norm, ts::kMaxGradNorm.default_value,
          "Clip gradients to this global L2 norm (0 = off).");
ABSL_FLAG(std::string, optimizer, std::string(ts::kOptimizer.default_value), "sgd or adamw.");
ABSL_FLAG(double, weight_decay, ts::kWeightDecay.default_value,
          "L2 (sgd) or decoupled (adamw) weight decay.");
ABSL_FLAG(bool, nesterov, ts::kNesterov.default_value, "Nesterov momentum (sgd).");
ABSL_FLAG(double, adam_beta1, ts::kAdamBeta1.default_value, "AdamW beta1.");
ABSL_FLAG(double, adam_beta2, ts::kAdamBeta2.default_value, "AdamW beta2.");
ABSL_FLAG(double, adam_eps, ts::kAdamEps.default_value, "AdamW epsilon.");
ABSL_FLAG(std::string, lr_schedule, std::string(ts::kLrSchedule.default_value),
          "constant, cosine or step.");
ABSL_FLAG(int64_t, warmup_steps, ts::kWarmupSteps.default_value, "Linear warmup steps.");
ABSL_FLAG(int64_t, lr_step_size, ts::kLrStepSize.default_value,
          "step schedule: steps between decays.");
ABSL_FLAG(double, lr_gamma, ts::kLrGamma.default_value, "step schedule: decay factor.");
ABSL_FLAG(double, min_lr, ts::kMinLr.default_value, "cosine schedule: final lr.");
ABSL_FLAG(int64_t, base_batch, ts::kBaseBatch.default_value,
          "Linear scaling rule reference batch (0 = off).");
ABSL_FLAG(int32_t, loader_threads, ts::kLoaderThreads.default_value,
          "Background loader threads per rank.");
ABSL_FLAG(int32_t, prefetch_batches, ts::kPrefetchBatches.default_value,
          "Batches prepared ahead per rank.");
ABSL_FLAG(int64_t, image_size, ts::kImageSize.default_value,
          "Image side (0 = the dataset's default: 224 image_folder, 32 synthetic).");
ABSL_FLAG(int64_t, context_length, ts::kContextLength.default_value,
          "Sequence length (tokens / gpt).");
ABSL_FLAG(int64_t, synthetic_samples, ts::kSyntheticSamples.default_value,
          "synthetic: training samples.");
ABSL_FLAG(int64_t, num_classes, ts::kNumClasses.default_value, "synthetic: classes.");
ABSL_FLAG(int64_t, gpt_layers, ts::kGptLayers.default_value, "gpt: layers.");
ABSL_FLAG(int64_t, gpt_heads, ts::kGptHeads.default_value, "gpt: attention heads.");
ABSL_FLAG(int64_t, gpt_width, ts::kGptWidth.default_value, "gpt: embedding width.");
ABSL_FLAG(int64_t, vocab_size, ts::kVocabSize.default_value, "gpt / tokens: vocabulary size.");
ABSL_FLAG(std::string, torchscript_path, std::string(ts::kTorchscriptPath.default_value),
          "torchscript: the module file.");
ABSL_FLAG(std::string, task, std::string(ts::kTask.default_value),
          "torchscript: classification or language_model.");
ABSL_FLAG(int64_t, checkpoint_every, ts::kCheckpointEvery.default_value,
          "Steps between checkpoints (0 = only at the end).");
ABSL_FLAG(int32_t, keep_checkpoints, ts::kKeepCheckpoints.default_value,
          "Step checkpoints to keep.");
ABSL_FLAG(int64_t, global_batch, ts::kGlobalBatch.default_value,
          "Samples per optimizer step over all ranks, kept whatever the world size (0 = "
          "--batch_size per rank). --batch_size is then the largest micro-batch; the "
          "accumulation steps are derived, and a resized gang resumes exactly.");
ABSL_FLAG(std::string, sample_log, std::string(ts::kSampleLog.default_value),
          "Append each step's sample ids to <this>.<rank> (one line: generation step rank "
          "ids), to audit which data was trained on across restarts.");
ABSL_FLAG(std::string, activation_checkpointing,
          std::string(ts::kActivationCheckpointing.default_value),
          "none, or blocks: recompute each block's activations in backward (resnet18, "
          "resnet50, gpt).");
ABSL_FLAG(int32_t, zero_stage, static_cast<int32_t>(ts::kZeroStage.default_value),
          "TrainerSpec.zero.stage: 0 (every rank keeps everything), 1 to shard the optimizer "
          "state over the ranks, 2 to shard the gradients too (reduce-scattered bucket by "
          "bucket; not with --grad_compression).");
ABSL_FLAG(bool, zero_offload_optimizer, ts::kZeroOffloadOptimizer.default_value,
          "TrainerSpec.zero.offload_optimizer: with --zero_stage 1 or 2, keep the sharded "
          "optimizer state and run its update in pinned host memory when training on GPUs "
          "(no-op on CPU).");
ABSL_FLAG(int32_t, pipeline_stages, static_cast<int32_t>(ts::kPipelineStages.default_value),
          "TrainerSpec.pipeline.stages: ranks per pipeline the model is split over (1 = no "
          "pipeline; the world must be a multiple: stages x data-parallel replicas).");
ABSL_FLAG(int32_t, pipeline_micro_batches,
          static_cast<int32_t>(ts::kPipelineMicroBatches.default_value),
          "TrainerSpec.pipeline.micro_batches: micro-batches per step and pipeline (>= "
          "--pipeline_stages, divides --batch_size).");
ABSL_FLAG(std::string, pipeline_schedule, std::string(ts::kPipelineSchedule.default_value),
          "TrainerSpec.pipeline.schedule: gpipe or 1f1b.");
// Budget fields and JobSpec.checkpoint_dir.
ABSL_FLAG(int64_t, max_steps, ts::kMaxSteps.default_value,
          "Stop after this many steps (0 = no limit).");
ABSL_FLAG(int64_t, max_epochs, ts::kMaxEpochs.default_value,
          "Stop after this many epochs (0 = no limit).");
ABSL_FLAG(std::string, checkpoint_dir, std::string(ts::kCheckpointDir.default_value),
          "Checkpoints and final.pt go here (created).");

namespace baton::trainer {
namespace {

// ts::Check(field, value, "--<name>").
template <typename Field, typename Value>
absl::Status CheckFlag(const Field& field, const Value& value) {
  return ts::Check(field, value, ts::FlagLabel(field));
}

bool IsLanguageModel() {
  return absl::GetFlag(FLAGS_model) == "gpt" || (absl::GetFlag(FLAGS_model) == "torchscript" &&
                                                 absl::GetFlag(FLAGS_task) == "language_model");
}

// The data flags. The model flags it shares (vocab_size, context_length) are checked with
// the trainer options.
absl::StatusOr<DataOptions> DataOptionsFromFlags() {
  DataOptions data;
  data.dataset = absl::GetFlag(FLAGS_dataset);
  data.data_dir = absl::GetFlag(FLAGS_data_dir);
  RETURN_IF_ERROR(CheckFlag(ts::kDataset, data.dataset));
  if (data.dataset != "synthetic" && data.data_dir.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(ts::FlagLabel(ts::kDataDir),
                                                   ": is required for dataset ", data.dataset,
                                                   "; the directory holding its files"));
  }
  data.image_size = absl::GetFlag(FLAGS_image_size);
  data.context_length = absl::GetFlag(FLAGS_context_length);
  data.synthetic_samples = absl::GetFlag(FLAGS_synthetic_samples);
  data.num_classes = absl::GetFlag(FLAGS_num_classes);
  data.vocab_size = absl::GetFlag(FLAGS_vocab_size);
  RETURN_IF_ERROR(CheckFlag(ts::kImageSize, data.image_size));
  RETURN_IF_ERROR(CheckFlag(ts::kSyntheticSamples, data.synthetic_samples));
  RETURN_IF_ERROR(CheckFlag(ts::kNumClasses, data.num_classes));
  data.synthetic_tokens = IsLanguageModel();
  data.seed = absl::GetFlag(FLAGS_seed);
  return data;
}

absl::StatusOr<ModelOptions> ModelOptionsFromFlags() {
  ModelOptions model;
  model.model = absl::GetFlag(FLAGS_model);
  ASSIGN_OR_RETURN(model.hidden, ParseHiddenWidths(absl::GetFlag(FLAGS_hidden)));
  model.gpt_layers = absl::GetFlag(FLAGS_gpt_layers);
  model.gpt_heads = absl::GetFlag(FLAGS_gpt_heads);
  model.gpt_width = absl::GetFlag(FLAGS_gpt_width);
  model.vocab_size = absl::GetFlag(FLAGS_vocab_size);
  model.context_length = absl::GetFlag(FLAGS_context_length);
  model.torchscript_path = absl::GetFlag(FLAGS_torchscript_path);
  model.task = absl::GetFlag(FLAGS_task);
  model.activation_checkpointing = absl::GetFlag(FLAGS_activation_checkpointing);
  return model;
}

OptimizerOptions OptimizerOptionsFromFlags() {
  OptimizerOptions optimizer;
  optimizer.name = absl::GetFlag(FLAGS_optimizer);
  optimizer.lr = absl::GetFlag(FLAGS_lr);
  optimizer.momentum = absl::GetFlag(FLAGS_momentum);
  optimizer.nesterov = absl::GetFlag(FLAGS_nesterov);
  optimizer.weight_decay = absl::GetFlag(FLAGS_weight_decay);
  optimizer.adam_beta1 = absl::GetFlag(FLAGS_adam_beta1);
  optimizer.adam_beta2 = absl::GetFlag(FLAGS_adam_beta2);
  optimizer.adam_eps = absl::GetFlag(FLAGS_adam_eps);
  return optimizer;
}

LrScheduleOptions ScheduleOptionsFromFlags() {
  LrScheduleOptions schedule;
  schedule.kind = absl::GetFlag(FLAGS_lr_schedule);
  schedule.warmup_steps = absl::GetFlag(FLAGS_warmup_steps);
  schedule.step_size = absl::GetFlag(FLAGS_lr_step_size);
  schedule.gamma = absl::GetFlag(FLAGS_lr_gamma);
  schedule.min_lr = absl::GetFlag(FLAGS_min_lr);
  schedule.base_batch = absl::GetFlag(FLAGS_base_batch);
  return schedule;
}

// precision and grad_compression are checked against the table before they are parsed
// into their enums.
absl::StatusOr<TrainStepOptions> StepOptionsFromFlags() {
  TrainStepOptions step;
  RETURN_IF_ERROR(CheckFlag(ts::kPrecision, absl::GetFlag(FLAGS_precision)));
  ASSIGN_OR_RETURN(step.precision, ParsePrecision(absl::GetFlag(FLAGS_precision)));
  step.accumulation_steps = absl::GetFlag(FLAGS_accumulation_steps);
  step.max_grad_norm = absl::GetFlag(FLAGS_max_grad_norm);
  step.reducer.bucket_cap_mb = absl::GetFlag(FLAGS_bucket_cap_mb);
  RETURN_IF_ERROR(CheckFlag(ts::kGradCompression, absl::GetFlag(FLAGS_grad_compression)));
  ASSIGN_OR_RETURN(step.reducer.compression,
                   ParseGradCompression(absl::GetFlag(FLAGS_grad_compression)));
  return step;
}

absl::StatusOr<TrainerOptions> TrainerOptionsFromFlags() {
  TrainerOptions options;
  ASSIGN_OR_RETURN(options.model, ModelOptionsFromFlags());
  options.optimizer = OptimizerOptionsFromFlags();
  options.schedule = ScheduleOptionsFromFlags();
  ASSIGN_OR_RETURN(options.step, StepOptionsFromFlags());
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.loader_threads = absl::GetFlag(FLAGS_loader_threads);
  options.prefetch_batches = absl::GetFlag(FLAGS_prefetch_batches);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.log_every = absl::GetFlag(FLAGS_log_every);
  options.max_steps = absl::GetFlag(FLAGS_max_steps);
  options.max_epochs = absl::GetFlag(FLAGS_max_epochs);
  options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  options.global_batch = absl::GetFlag(FLAGS_global_batch);
  options.sample_log = absl::GetFlag(FLAGS_sample_log);
  options.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  options.keep_checkpoints = absl::GetFlag(FLAGS_keep_checkpoints);
  options.zero_stage = absl::GetFlag(FLAGS_zero_stage);
  options.zero_offload_optimizer = absl::GetFlag(FLAGS_zero_offload_optimizer);
  options.pipeline_stages = absl::GetFlag(FLAGS_pipeline_stages);
  options.pipeline_micro_batches = absl::GetFlag(FLAGS_pipeline_micro_batches);
  options.pipeline_schedule = absl::GetFlag(FLAGS_pipeline_schedule);
  RETURN_IF_ERROR(ValidateTrainerOptions(options));
  return options;
}

}  // namespace

absl::Status ParseFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "--helpfull") {
      absl::ParseCommandLine(argc, argv);  // Prints usage and exits.
    }
    if (!absl::ConsumePrefix(&arg, "--") && !absl::ConsumePrefix(&arg, "-")) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", argv[i], "'"));
    }
    std::string name(arg);
    std::string value;
    if (const size_t eq = arg.find('='); eq != absl::string_view::npos) {
      name = std::string(arg.substr(0, eq));
      value = std::string(arg.substr(eq + 1));
    } else if (i + 1 < argc) {
      value = argv[++i];
    } else {
      return absl::InvalidArgumentError(absl::StrCat("flag --", name, " has no value"));
    }
    absl::CommandLineFlag* flag = absl::FindCommandLineFlag(name);
    if (flag == nullptr) return absl::InvalidArgumentError(absl::StrCat("unknown flag --", name));
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, "=", value, ": ", error));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<FlagOptions> OptionsFromFlags() {
  FlagOptions options;
  options.threads = absl::GetFlag(FLAGS_threads);
  RETURN_IF_ERROR(CheckFlag(ts::kThreads, options.threads));
  ASSIGN_OR_RETURN(options.trainer, TrainerOptionsFromFlags());
  ASSIGN_OR_RETURN(options.data, DataOptionsFromFlags());
  return options;
}

}  // namespace baton::trainer
