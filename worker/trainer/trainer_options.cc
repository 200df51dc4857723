#include "worker/trainer/trainer_options.h"

#include "absl/strings/str_cat.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"

namespace baton::trainer {
namespace {

namespace ts = ::baton::trainer_spec;

// ts::Check(field, value, "--<name>").
template <typename Field, typename Value>
absl::Status CheckFlag(const Field& field, const Value& value) {
  return ts::Check(field, value, ts::FlagLabel(field));
}

absl::Status ValidateModelAndOptimizer(const ModelOptions& m, const OptimizerOptions& o) {
  RETURN_IF_ERROR(CheckFlag(ts::kModel, m.model));
  RETURN_IF_ERROR(CheckFlag(ts::kHidden, m.hidden));
  RETURN_IF_ERROR(CheckFlag(ts::kContextLength, m.context_length));
  RETURN_IF_ERROR(CheckFlag(ts::kGptLayers, m.gpt_layers));
  RETURN_IF_ERROR(CheckFlag(ts::kGptHeads, m.gpt_heads));
  RETURN_IF_ERROR(CheckFlag(ts::kGptWidth, m.gpt_width));
  RETURN_IF_ERROR(CheckFlag(ts::kVocabSize, m.vocab_size));
  RETURN_IF_ERROR(CheckFlag(ts::kTask, m.task));
  RETURN_IF_ERROR(CheckFlag(ts::kActivationCheckpointing, m.activation_checkpointing));
  if (m.activation_checkpointing == "blocks" && !ts::HasCheckpointableBlocks(m.model)) {
    return absl::InvalidArgumentError(absl::StrCat(
        ts::FlagLabel(ts::kActivationCheckpointing), ": 'blocks' is not supported by --model=",
        m.model, ", which has no blocks; use resnet18, resnet50 or gpt, or 'none'"));
  }
  RETURN_IF_ERROR(CheckFlag(ts::kOptimizer, o.name));
  RETURN_IF_ERROR(CheckFlag(ts::kLr, o.lr));
  RETURN_IF_ERROR(CheckFlag(ts::kMomentum, o.momentum));
  RETURN_IF_ERROR(CheckFlag(ts::kWeightDecay, o.weight_decay));
  if (o.nesterov && (o.name != "sgd" || !(o.momentum > 0))) {
    return absl::InvalidArgumentError(
        absl::StrCat(ts::FlagLabel(ts::kNesterov), " needs --optimizer=sgd with --momentum > 0"));
  }
  RETURN_IF_ERROR(CheckFlag(ts::kAdamBeta1, o.adam_beta1));
  RETURN_IF_ERROR(CheckFlag(ts::kAdamBeta2, o.adam_beta2));
  return CheckFlag(ts::kAdamEps, o.adam_eps);
}

absl::Status ValidateScheduleAndStep(const LrScheduleOptions& s, const TrainStepOptions& t) {
  RETURN_IF_ERROR(CheckFlag(ts::kLrSchedule, s.kind));
  RETURN_IF_ERROR(CheckFlag(ts::kWarmupSteps, s.warmup_steps));
  RETURN_IF_ERROR(CheckFlag(ts::kLrStepSize, s.step_size));
  if (s.kind == "step" && s.step_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        ts::FlagLabel(ts::kLrStepSize), ": 0 is invalid; must be > 0 for lr_schedule 'step'"));
  }
  RETURN_IF_ERROR(CheckFlag(ts::kLrGamma, s.gamma));
  RETURN_IF_ERROR(CheckFlag(ts::kMinLr, s.min_lr));
  RETURN_IF_ERROR(CheckFlag(ts::kBaseBatch, s.base_batch));
  RETURN_IF_ERROR(CheckFlag(ts::kAccumulationSteps, t.accumulation_steps));
  RETURN_IF_ERROR(CheckFlag(ts::kBucketCapMb, t.reducer.bucket_cap_mb));
  return CheckFlag(ts::kMaxGradNorm, t.max_grad_norm);
}

absl::Status ValidateBatchDataAndBudget(const TrainerOptions& o) {
  RETURN_IF_ERROR(CheckFlag(ts::kBatchSize, o.batch_size));
  RETURN_IF_ERROR(CheckFlag(ts::kGlobalBatch, o.global_batch));
  if (o.global_batch > 0 && o.step.accumulation_steps != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(ts::FlagLabel(ts::kGlobalBatch),
                     " derives the accumulation steps per world size; leave "
                     "--accumulation_steps at 1"));
  }
  RETURN_IF_ERROR(CheckFlag(ts::kLoaderThreads, o.loader_threads));
  RETURN_IF_ERROR(CheckFlag(ts::kPrefetchBatches, o.prefetch_batches));
  RETURN_IF_ERROR(CheckFlag(ts::kLogEvery, o.log_every));
  RETURN_IF_ERROR(CheckFlag(ts::kCheckpointEvery, o.checkpoint_every));
  RETURN_IF_ERROR(CheckFlag(ts::kKeepCheckpoints, o.keep_checkpoints));
  RETURN_IF_ERROR(CheckFlag(ts::kMaxSteps, o.max_steps));
  RETURN_IF_ERROR(CheckFlag(ts::kMaxEpochs, o.max_epochs));
  RETURN_IF_ERROR(CheckFlag(ts::kZeroStage, o.zero_stage));
  const GradCompression compression = o.step.reducer.compression;
  RETURN_IF_ERROR(ts::CheckZeroCombination(o.zero_stage, o.zero_offload_optimizer,
                                           compression == GradCompression::kNone   ? "none"
                                           : compression == GradCompression::kBf16 ? "bf16"
                                                                                   : "fp16",
                                           ts::FlagLabel(ts::kZeroStage),
                                           ts::FlagLabel(ts::kZeroOffloadOptimizer),
                                           ts::FlagLabel(ts::kGradCompression)));
  RETURN_IF_ERROR(CheckFlag(ts::kPipelineStages, o.pipeline_stages));
  RETURN_IF_ERROR(CheckFlag(ts::kPipelineMicroBatches, o.pipeline_micro_batches));
  RETURN_IF_ERROR(CheckFlag(ts::kPipelineSchedule, o.pipeline_schedule));
  const ts::PipelineSettings pipeline{o.pipeline_stages,
                                      o.pipeline_micro_batches,
                                      o.model.model,
                                      o.model.gpt_layers,
                                      static_cast<int64_t>(o.model.hidden.size()) + 1,
                                      o.batch_size,
                                      o.zero_stage,
                                      o.model.activation_checkpointing,
                                      PrecisionName(o.step.precision),
                                      o.step.accumulation_steps,
                                      compression == GradCompression::kNone   ? "none"
                                      : compression == GradCompression::kBf16 ? "bf16"
                                                                              : "fp16"};
  RETURN_IF_ERROR(ts::CheckPipeline(
      pipeline,
      {ts::FlagLabel(ts::kPipelineStages), ts::FlagLabel(ts::kPipelineMicroBatches),
       ts::FlagLabel(ts::kGptLayers), ts::FlagLabel(ts::kBatchSize), ts::FlagLabel(ts::kZeroStage),
       ts::FlagLabel(ts::kActivationCheckpointing), ts::FlagLabel(ts::kPrecision),
       ts::FlagLabel(ts::kAccumulationSteps), ts::FlagLabel(ts::kGradCompression)}));
  if (o.pipeline_stages > 1 && !o.sample_log.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(ts::FlagLabel(ts::kSampleLog), " is not supported with ",
                     ts::FlagLabel(ts::kPipelineStages), "=", o.pipeline_stages));
  }
  if (o.max_steps == 0 && o.max_epochs == 0) {
    return absl::InvalidArgumentError("one of --max_steps and --max_epochs must be > 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrainerOptions(const TrainerOptions& o) {
  RETURN_IF_ERROR(ValidateModelAndOptimizer(o.model, o.optimizer));
  RETURN_IF_ERROR(ValidateScheduleAndStep(o.schedule, o.step));
  return ValidateBatchDataAndBudget(o);
}

}  // namespace baton::trainer
