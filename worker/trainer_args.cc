#include "worker/trainer_args.h"

#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "worker/path_lookup.h"
#include "worker/trainer/contract.h"

namespace baton::worker {
namespace {

std::string FormatDouble(double v) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::general);
  return std::string(buf, result.ptr);
}

}  // namespace

std::vector<std::string> TrainerArgv(const std::string& trainer_path,
                                     const baton::v1::TrainerSpec& trainer,
                                     const baton::v1::Budget& budget,
                                     const std::string& checkpoint_dir) {
  std::vector<std::string> argv = {trainer_path};
  auto add = [&argv](absl::string_view flag, const std::string& value) {
    argv.push_back(absl::StrCat("--", flag, "=", value));
  };
  if (!trainer.model().empty()) add(trainer::kFlagModel, trainer.model());
  if (!trainer.dataset().empty()) add(trainer::kFlagDataset, trainer.dataset());
  if (!trainer.data_dir().empty()) add(trainer::kFlagDataDir, trainer.data_dir());
  if (trainer.batch_size() != 0) add(trainer::kFlagBatchSize, absl::StrCat(trainer.batch_size()));
  if (trainer.lr() != 0) add(trainer::kFlagLr, FormatDouble(trainer.lr()));
  if (trainer.has_momentum()) add(trainer::kFlagMomentum, FormatDouble(trainer.momentum()));
  if (trainer.seed() != 0) add(trainer::kFlagSeed, absl::StrCat(trainer.seed()));
  if (trainer.hidden_size() > 0) add(trainer::kFlagHidden, absl::StrJoin(trainer.hidden(), ","));
  if (trainer.log_every() != 0) add(trainer::kFlagLogEvery, absl::StrCat(trainer.log_every()));
  if (trainer.threads() != 0) add(trainer::kFlagThreads, absl::StrCat(trainer.threads()));
  // Numerics.
  if (!trainer.precision().empty()) add(trainer::kFlagPrecision, trainer.precision());
  if (trainer.accumulation_steps() != 0) {
    add(trainer::kFlagAccumulationSteps, absl::StrCat(trainer.accumulation_steps()));
  }
  if (trainer.bucket_cap_mb() != 0) {
    add(trainer::kFlagBucketCapMb, FormatDouble(trainer.bucket_cap_mb()));
  }
  if (!trainer.grad_compression().empty()) {
    add(trainer::kFlagGradCompression, trainer.grad_compression());
  }
  if (trainer.max_grad_norm() != 0) {
    add(trainer::kFlagMaxGradNorm, FormatDouble(trainer.max_grad_norm()));
  }
  // Optimisation.
  if (!trainer.optimizer().empty()) add(trainer::kFlagOptimizer, trainer.optimizer());
  if (trainer.weight_decay() != 0) {
    add(trainer::kFlagWeightDecay, FormatDouble(trainer.weight_decay()));
  }
  if (trainer.nesterov()) add(trainer::kFlagNesterov, "true");
  if (trainer.has_adam_beta1()) add(trainer::kFlagAdamBeta1, FormatDouble(trainer.adam_beta1()));
  if (trainer.has_adam_beta2()) add(trainer::kFlagAdamBeta2, FormatDouble(trainer.adam_beta2()));
  if (trainer.has_adam_eps()) add(trainer::kFlagAdamEps, FormatDouble(trainer.adam_eps()));
  if (!trainer.lr_schedule().empty()) add(trainer::kFlagLrSchedule, trainer.lr_schedule());
  if (trainer.warmup_steps() != 0) {
    add(trainer::kFlagWarmupSteps, absl::StrCat(trainer.warmup_steps()));
  }
  if (trainer.lr_step_size() != 0) {
    add(trainer::kFlagLrStepSize, absl::StrCat(trainer.lr_step_size()));
  }
  if (trainer.has_lr_gamma()) add(trainer::kFlagLrGamma, FormatDouble(trainer.lr_gamma()));
  if (trainer.min_lr() != 0) add(trainer::kFlagMinLr, FormatDouble(trainer.min_lr()));
  if (trainer.base_batch() != 0) add(trainer::kFlagBaseBatch, absl::StrCat(trainer.base_batch()));
  // Data.
  if (trainer.loader_threads() != 0) {
    add(trainer::kFlagLoaderThreads, absl::StrCat(trainer.loader_threads()));
  }
  if (trainer.prefetch_batches() != 0) {
    add(trainer::kFlagPrefetchBatches, absl::StrCat(trainer.prefetch_batches()));
  }
  if (trainer.image_size() != 0) add(trainer::kFlagImageSize, absl::StrCat(trainer.image_size()));
  if (trainer.context_length() != 0) {
    add(trainer::kFlagContextLength, absl::StrCat(trainer.context_length()));
  }
  if (trainer.synthetic_samples() != 0) {
    add(trainer::kFlagSyntheticSamples, absl::StrCat(trainer.synthetic_samples()));
  }
  if (trainer.num_classes() != 0) {
    add(trainer::kFlagNumClasses, absl::StrCat(trainer.num_classes()));
  }
  // Models.
  if (trainer.gpt_layers() != 0) add(trainer::kFlagGptLayers, absl::StrCat(trainer.gpt_layers()));
  if (trainer.gpt_heads() != 0) add(trainer::kFlagGptHeads, absl::StrCat(trainer.gpt_heads()));
  if (trainer.gpt_width() != 0) add(trainer::kFlagGptWidth, absl::StrCat(trainer.gpt_width()));
  if (trainer.vocab_size() != 0) add(trainer::kFlagVocabSize, absl::StrCat(trainer.vocab_size()));
  if (!trainer.torchscript_path().empty()) {
    add(trainer::kFlagTorchscriptPath, trainer.torchscript_path());
  }
  if (!trainer.task().empty()) add(trainer::kFlagTask, trainer.task());
  // Checkpoints.
  if (trainer.checkpoint_every() != 0) {
    add(trainer::kFlagCheckpointEvery, absl::StrCat(trainer.checkpoint_every()));
  }
  if (trainer.keep_checkpoints() != 0) {
    add(trainer::kFlagKeepCheckpoints, absl::StrCat(trainer.keep_checkpoints()));
  }
  if (trainer.global_batch() != 0) {
    add(trainer::kFlagGlobalBatch, absl::StrCat(trainer.global_batch()));
  }
  if (!trainer.sample_log().empty()) add(trainer::kFlagSampleLog, trainer.sample_log());
  if (budget.max_steps() != 0) add(trainer::kFlagMaxSteps, absl::StrCat(budget.max_steps()));
  if (budget.max_epochs() != 0) add(trainer::kFlagMaxEpochs, absl::StrCat(budget.max_epochs()));
  if (!checkpoint_dir.empty()) add(trainer::kFlagCheckpointDir, checkpoint_dir);
  return argv;
}

absl::StatusOr<std::string> ResolveTrainerPath(const std::string& flag_value,
                                               const std::string& self_exe,
                                               const std::string& path_env) {
  if (!flag_value.empty()) return flag_value;
  std::vector<std::string> tried;
  const size_t slash = self_exe.rfind('/');
  if (slash != std::string::npos) {
    const std::string dir = self_exe.substr(0, slash);
    for (const std::string& candidate :
         {absl::StrCat(dir, "/baton-trainer"), absl::StrCat(dir, "/trainer/baton-trainer")}) {
      if (IsExecutableFile(candidate)) return candidate;
      tried.push_back(candidate);
    }
  }
  absl::StatusOr<std::string> on_path = FindExecutable("baton-trainer", path_env);
  if (on_path.ok()) return on_path;
  tried.push_back("$PATH");
  return absl::NotFoundError(absl::StrCat("baton-trainer not found (tried ",
                                          absl::StrJoin(tried, ", "), "); pass --trainer"));
}

}  // namespace baton::worker
