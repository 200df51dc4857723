#include "common/spec/trainer_rules.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace baton::trainer_spec {
namespace {

absl::Status Invalid(absl::string_view label, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", what));
}

bool IsAbsolute(absl::string_view path) { return !path.empty() && path[0] == '/'; }

// "none" or "" (unset).
bool Uncompressed(absl::string_view grad_compression) {
  return grad_compression.empty() || grad_compression == "none";
}

}  // namespace

bool IsLanguageModel(absl::string_view model, absl::string_view task) {
  return model == "gpt" || (model == "torchscript" && task == "language_model");
}

absl::Status CheckDataDir(absl::string_view dataset, absl::string_view data_dir, Naming naming) {
  const std::string label = Label(kDataDir, naming);
  if (naming == Naming::kFlags) {
    if (dataset == "synthetic" || !data_dir.empty()) return absl::OkStatus();
    return Invalid(label, absl::StrCat("is required for dataset ", dataset,
                                       "; the directory holding its files"));
  }
  if (dataset == "synthetic") {
    if (data_dir.empty()) return absl::OkStatus();
    return Invalid(label, absl::StrCat("'", data_dir, "' is set; must be empty for the ", dataset,
                                       " dataset (it reads no files)"));
  }
  if (data_dir.empty()) {
    return Invalid(label, "is required; the absolute directory holding the dataset files");
  }
  if (!IsAbsolute(data_dir)) {
    return Invalid(label, absl::StrCat("'", data_dir, "' is relative; must be an absolute path"));
  }
  return absl::OkStatus();
}

absl::Status CheckNesterov(bool nesterov, absl::string_view optimizer, double momentum,
                           Naming naming) {
  if (!nesterov || (optimizer == "sgd" && momentum > 0)) return absl::OkStatus();
  if (naming == Naming::kSpec) {
    return Invalid(Label(kNesterov, naming),
                   "needs optimizer 'sgd' with momentum > 0; unset it or set momentum");
  }
  return absl::InvalidArgumentError(absl::StrCat(Label(kNesterov, naming), " needs ",
                                                 Label(kOptimizer, naming), "=sgd with ",
                                                 Label(kMomentum, naming), " > 0"));
}

absl::Status CheckLrStepSize(absl::string_view lr_schedule, int64_t lr_step_size, Naming naming) {
  if (lr_schedule != "step" || lr_step_size != 0) return absl::OkStatus();
  return Invalid(Label(kLrStepSize, naming), "0 is invalid; must be > 0 for lr_schedule 'step'");
}

absl::Status CheckGptWidth(int64_t gpt_width, int64_t gpt_heads, Naming naming) {
  if (gpt_heads <= 0 || gpt_width % gpt_heads == 0) return absl::OkStatus();
  return Invalid(Label(kGptWidth, naming),
                 absl::StrCat(gpt_width, " is not divisible by ", Label(kGptHeads, naming), " (",
                              gpt_heads, ")"));
}

absl::Status CheckTorchscriptPath(absl::string_view model, absl::string_view torchscript_path,
                                  Naming naming) {
  const std::string label = Label(kTorchscriptPath, naming);
  if (model != "torchscript") {
    if (torchscript_path.empty()) return absl::OkStatus();
    return Invalid(label, "is set; only model 'torchscript' uses it");
  }
  if (IsAbsolute(torchscript_path)) return absl::OkStatus();
  return Invalid(label, absl::StrCat("'", torchscript_path,
                                     "' is invalid; model 'torchscript' needs the absolute "
                                     "path of a module saved by torch.jit.script(m).save()"));
}

absl::Status CheckActivationCheckpointing(absl::string_view activation_checkpointing,
                                          absl::string_view model, Naming naming) {
  if (activation_checkpointing != "blocks" || HasCheckpointableBlocks(model)) {
    return absl::OkStatus();
  }
  const std::string label = Label(kActivationCheckpointing, naming);
  if (naming == Naming::kSpec) {
    return Invalid(label, absl::StrCat("'blocks' is not supported by model '", model,
                                       "', which has no blocks; 'blocks' needs resnet18, "
                                       "resnet50 or gpt, else use 'none'"));
  }
  return Invalid(label,
                 absl::StrCat("'blocks' is not supported by ", Label(kModel, naming), "=", model,
                              ", which has no blocks; use resnet18, resnet50 or gpt, or "
                              "'none'"));
}

absl::Status CheckModelFitsDataset(absl::string_view model, absl::string_view task,
                                   absl::string_view dataset, Naming naming) {
  const bool language_model = IsLanguageModel(model, task);
  if (language_model && dataset != "tokens" && dataset != "synthetic") {
    return Invalid(Label(kDataset, naming),
                   absl::StrCat("'", dataset,
                                "' holds images; the language model needs 'tokens' or "
                                "'synthetic'"));
  }
  if (!language_model && dataset == "tokens") {
    return Invalid(Label(kModel, naming),
                   absl::StrCat("'", model,
                                "' is a classifier; the tokens dataset needs 'gpt' or "
                                "'torchscript' with task 'language_model'"));
  }
  return absl::OkStatus();
}

absl::Status CheckGlobalBatch(int64_t global_batch, int64_t accumulation_steps, Naming naming) {
  if (global_batch <= 0 || accumulation_steps == 1) return absl::OkStatus();
  if (naming == Naming::kSpec) {
    return Invalid(Label(kAccumulationSteps, naming),
                   absl::StrCat(accumulation_steps, " is set with ", Label(kGlobalBatch, naming),
                                ", which derives the accumulation steps per world size; unset "
                                "it"));
  }
  return absl::InvalidArgumentError(absl::StrCat(
      Label(kGlobalBatch, naming), " derives the accumulation steps per world size; leave ",
      Label(kAccumulationSteps, naming), " at 1"));
}

absl::Status CheckZeroCombination(int64_t stage, bool offload_optimizer,
                                  absl::string_view grad_compression, Naming naming) {
  const std::string stage_label = Label(kZeroStage, naming);
  if (offload_optimizer && stage == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(Label(kZeroOffloadOptimizer, naming), ": true needs ", stage_label,
                     " 1 or 2 (the sharded optimizer state is what is offloaded); it is 0"));
  }
  if (stage == 2 && !Uncompressed(grad_compression)) {
    const std::string compression_label = Label(kGradCompression, naming);
    return absl::InvalidArgumentError(absl::StrCat(
        stage_label, ": 2 cannot be combined with ", compression_label, "=", grad_compression,
        " (stage 2 reduce-scatters full-width gradients); use stage 1, or ", compression_label,
        "=none"));
  }
  return absl::OkStatus();
}

absl::Status CheckPipeline(const PipelineSettings& s, Naming naming) {
  if (s.stages <= 1) return absl::OkStatus();
  const std::string stages = Label(kPipelineStages, naming);
  const std::string micro_batches = Label(kPipelineMicroBatches, naming);
  if (s.micro_batches < s.stages) {
    return absl::InvalidArgumentError(absl::StrCat(micro_batches, ": ", s.micro_batches,
                                                   " is fewer than the ", s.stages,
                                                   " stages; must be >= ", stages));
  }
  if (s.model == "gpt") {
    if (s.gpt_layers % s.stages != 0) {
      return absl::InvalidArgumentError(absl::StrCat(stages, ": ", s.stages, " does not divide ",
                                                     Label(kGptLayers, naming), " ", s.gpt_layers,
                                                     "; must divide it"));
    }
  } else if (s.model == "mlp") {
    if (s.mlp_layers < s.stages) {
      return absl::InvalidArgumentError(
          absl::StrCat(stages, ": ", s.stages, " stages for an mlp of ", s.mlp_layers,
                       " layers; must be at most its layers (hidden widths + 1)"));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(stages, ": model '", s.model,
                                                   "' cannot be split into stages; allowed "
                                                   "with models gpt and mlp"));
  }
  if (s.batch_size % s.micro_batches != 0) {
    return absl::InvalidArgumentError(absl::StrCat(micro_batches, ": ", s.micro_batches,
                                                   " does not divide ", Label(kBatchSize, naming),
                                                   " ", s.batch_size, "; must divide it"));
  }
  if (s.zero_stage > 0) {
    const std::string zero_stage = Label(kZeroStage, naming);
    return absl::InvalidArgumentError(
        absl::StrCat(stages, ": pipeline parallelism is not supported with ", zero_stage, " ",
                     s.zero_stage, "; allowed with ", zero_stage, " 0"));
  }
  if (s.activation_checkpointing != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat(stages, ": pipeline parallelism is not supported with ",
                     Label(kActivationCheckpointing, naming), " '", s.activation_checkpointing,
                     "'; allowed with 'none'"));
  }
  if (!s.precision.empty() && s.precision != "fp32") {
    return absl::InvalidArgumentError(absl::StrCat(Label(kPrecision, naming), ": '", s.precision,
                                                   "' is not supported with pipeline parallelism (",
                                                   stages, " ", s.stages, "); allowed: fp32"));
  }
  if (s.accumulation_steps != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        Label(kAccumulationSteps, naming), ": ", s.accumulation_steps,
        " is not supported with pipeline parallelism (", stages, " ", s.stages,
        "); allowed: 1 (a pipeline accumulates over its ", micro_batches, " instead)"));
  }
  if (!Uncompressed(s.grad_compression)) {
    return absl::InvalidArgumentError(absl::StrCat(Label(kGradCompression, naming), ": '",
                                                   s.grad_compression,
                                                   "' is not supported with pipeline parallelism (",
                                                   stages, " ", s.stages, "); allowed: none"));
  }
  return absl::OkStatus();
}

absl::Status CheckSampleLog(absl::string_view sample_log, int64_t pipeline_stages, Naming naming) {
  if (pipeline_stages <= 1 || sample_log.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat(Label(kSampleLog, naming), " is not supported with ",
                   Label(kPipelineStages, naming), "=", pipeline_stages));
}

absl::Status CheckBudget(int64_t max_steps, int64_t max_epochs, Naming naming) {
  if (max_steps != 0 || max_epochs != 0) return absl::OkStatus();
  if (naming == Naming::kSpec) {
    // Budget is a JobSpec field of its own, not under "trainer.".
    return Invalid("budget",
                   "the trainer needs a limit; set budget.max_steps or "
                   "budget.max_epochs to a value > 0");
  }
  return absl::InvalidArgumentError(absl::StrCat("one of ", Label(kMaxSteps, naming), " and ",
                                                 Label(kMaxEpochs, naming), " must be > 0"));
}

}  // namespace baton::trainer_spec
