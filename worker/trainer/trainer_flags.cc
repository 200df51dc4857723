#include "worker/trainer/trainer_flags.h"

#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/types/optional.h"
#include "common/spec/trainer_rules.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"
#include "worker/trainer/device/precision.h"
#include "worker/trainer/models/mlp.h"
#include "worker/trainer/step/gradient_reducer.h"

namespace baton::trainer {
namespace {

namespace ts = ::baton::trainer_spec;

// The default of a table entry's flag; its return type is the flag's type. A list's flag
// is its text ("256,128").
constexpr int64_t FlagDefault(const ts::IntField& f) { return f.default_value; }
constexpr double FlagDefault(const ts::RealField& f) { return f.default_value; }
std::string FlagDefault(const ts::ChoiceField& f) { return std::string(f.default_value); }
std::string FlagDefault(const ts::TextField& f) { return std::string(f.default_value); }
constexpr bool FlagDefault(const ts::BoolField& f) { return f.default_value; }
constexpr uint64_t FlagDefault(const ts::Uint64Field& f) { return f.default_value; }
std::string FlagDefault(const ts::ListField& f) { return ts::ListText(f.default_value); }

template <typename Field>
using FlagType = decltype(FlagDefault(std::declval<const Field&>()));

// The value of the flag of `field`, of the type BATON_TRAINER_FLAG gave it.
template <typename Field>
absl::StatusOr<FlagType<Field>> FlagValue(const Field& field) {
  const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(field.name);
  absl::optional<FlagType<Field>> value;
  if (flag != nullptr) value = flag->TryGet<FlagType<Field>>();
  if (!value.has_value()) {
    return absl::InternalError(
        absl::StrCat("no flag ", ts::FlagLabel(field), " of its entry's type"));
  }
  return *std::move(value);
}

}  // namespace
}  // namespace baton::trainer

// Defines the contract flag --<flag> from the table entry trainer_spec::<entry>: its type,
// default and help text.
#define BATON_TRAINER_FLAG(flag, entry)                                                    \
  static_assert(::baton::trainer_spec::entry.name == #flag, "--" #flag " is not " #entry); \
  ABSL_FLAG(decltype(::baton::trainer::FlagDefault(::baton::trainer_spec::entry)), flag,   \
            ::baton::trainer::FlagDefault(::baton::trainer_spec::entry),                   \
            ::baton::trainer_spec::entry.help)

// One per entry of trainer_spec::TrainerFlagFields(), in its order (absl defines a flag only
// through ABSL_FLAG, whose name is a token, hence a line each; trainer_flags_test names an
// entry without one).
BATON_TRAINER_FLAG(model, kModel);
BATON_TRAINER_FLAG(dataset, kDataset);
BATON_TRAINER_FLAG(data_dir, kDataDir);
BATON_TRAINER_FLAG(batch_size, kBatchSize);
BATON_TRAINER_FLAG(lr, kLr);
BATON_TRAINER_FLAG(momentum, kMomentum);
BATON_TRAINER_FLAG(seed, kSeed);
BATON_TRAINER_FLAG(hidden, kHidden);
BATON_TRAINER_FLAG(log_every, kLogEvery);
BATON_TRAINER_FLAG(threads, kThreads);
BATON_TRAINER_FLAG(precision, kPrecision);
BATON_TRAINER_FLAG(accumulation_steps, kAccumulationSteps);
BATON_TRAINER_FLAG(bucket_cap_mb, kBucketCapMb);
BATON_TRAINER_FLAG(grad_compression, kGradCompression);
BATON_TRAINER_FLAG(max_grad_norm, kMaxGradNorm);
BATON_TRAINER_FLAG(optimizer, kOptimizer);
BATON_TRAINER_FLAG(weight_decay, kWeightDecay);
BATON_TRAINER_FLAG(nesterov, kNesterov);
BATON_TRAINER_FLAG(adam_beta1, kAdamBeta1);
BATON_TRAINER_FLAG(adam_beta2, kAdamBeta2);
BATON_TRAINER_FLAG(adam_eps, kAdamEps);
BATON_TRAINER_FLAG(lr_schedule, kLrSchedule);
BATON_TRAINER_FLAG(warmup_steps, kWarmupSteps);
BATON_TRAINER_FLAG(lr_step_size, kLrStepSize);
BATON_TRAINER_FLAG(lr_gamma, kLrGamma);
BATON_TRAINER_FLAG(min_lr, kMinLr);
BATON_TRAINER_FLAG(base_batch, kBaseBatch);
BATON_TRAINER_FLAG(loader_threads, kLoaderThreads);
BATON_TRAINER_FLAG(prefetch_batches, kPrefetchBatches);
BATON_TRAINER_FLAG(image_size, kImageSize);
BATON_TRAINER_FLAG(context_length, kContextLength);
BATON_TRAINER_FLAG(synthetic_samples, kSyntheticSamples);
BATON_TRAINER_FLAG(num_classes, kNumClasses);
BATON_TRAINER_FLAG(gpt_layers, kGptLayers);
BATON_TRAINER_FLAG(gpt_heads, kGptHeads);
BATON_TRAINER_FLAG(gpt_width, kGptWidth);
BATON_TRAINER_FLAG(vocab_size, kVocabSize);
BATON_TRAINER_FLAG(torchscript_path, kTorchscriptPath);
BATON_TRAINER_FLAG(task, kTask);
BATON_TRAINER_FLAG(checkpoint_every, kCheckpointEvery);
BATON_TRAINER_FLAG(eval_every, kEvalEvery);
BATON_TRAINER_FLAG(keep_checkpoints, kKeepCheckpoints);
BATON_TRAINER_FLAG(snapshot_every, kSnapshotEvery);
BATON_TRAINER_FLAG(global_batch, kGlobalBatch);
BATON_TRAINER_FLAG(sample_log, kSampleLog);
BATON_TRAINER_FLAG(activation_checkpointing, kActivationCheckpointing);
BATON_TRAINER_FLAG(zero_stage, kZeroStage);
BATON_TRAINER_FLAG(zero_offload_optimizer, kZeroOffloadOptimizer);
BATON_TRAINER_FLAG(pipeline_stages, kPipelineStages);
BATON_TRAINER_FLAG(pipeline_micro_batches, kPipelineMicroBatches);
BATON_TRAINER_FLAG(pipeline_schedule, kPipelineSchedule);
BATON_TRAINER_FLAG(max_steps, kMaxSteps);
BATON_TRAINER_FLAG(max_epochs, kMaxEpochs);
BATON_TRAINER_FLAG(checkpoint_dir, kCheckpointDir);

namespace baton::trainer {
namespace {

// Sets `member` from the flag of `field`, checked against the table first
// (ts::Check, "--<name>: ..."), then parsed where the member is not the flag's text. One
// overload per kind of entry and the member type that holds it, so that ForEachFlagOption
// pairing an entry with a member of another type does not compile.
template <typename Field, typename Member>
absl::Status FromFlag(const Field&, Member&) = delete;

// Checked before it is narrowed to the member's type (the table test keeps every entry's
// range within its member's).
template <typename Int,
          typename = std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>>>
absl::Status FromFlag(const ts::IntField& field, Int& member) {
  ASSIGN_OR_RETURN(const int64_t value, FlagValue(field));
  RETURN_IF_ERROR(ts::Check(field, value, ts::FlagLabel(field)));
  member = static_cast<Int>(value);
  return absl::OkStatus();
}

absl::Status FromFlag(const ts::RealField& field, double& member) {
  ASSIGN_OR_RETURN(member, FlagValue(field));
  return ts::Check(field, member, ts::FlagLabel(field));
}

absl::Status FromFlag(const ts::ChoiceField& field, std::string& member) {
  ASSIGN_OR_RETURN(member, FlagValue(field));
  return ts::Check(field, member, ts::FlagLabel(field));
}

absl::Status FromFlag(const ts::ChoiceField& field, Precision& member) {
  ASSIGN_OR_RETURN(const std::string name, FlagValue(field));
  RETURN_IF_ERROR(ts::Check(field, name, ts::FlagLabel(field)));
  ASSIGN_OR_RETURN(member, ParsePrecision(name));
  return absl::OkStatus();
}

absl::Status FromFlag(const ts::ChoiceField& field, GradCompression& member) {
  ASSIGN_OR_RETURN(const std::string name, FlagValue(field));
  RETURN_IF_ERROR(ts::Check(field, name, ts::FlagLabel(field)));
  ASSIGN_OR_RETURN(member, ParseGradCompression(name));
  return absl::OkStatus();
}

// --hidden, the one list.
absl::Status FromFlag(const ts::ListField& field, std::vector<int64_t>& member) {
  ASSIGN_OR_RETURN(const std::string text, FlagValue(field));
  ASSIGN_OR_RETURN(member, ParseHiddenWidths(text));
  return ts::Check(field, member, ts::FlagLabel(field));
}

absl::Status FromFlag(const ts::TextField& field, std::string& member) {
  ASSIGN_OR_RETURN(member, FlagValue(field));
  return absl::OkStatus();
}

absl::Status FromFlag(const ts::BoolField& field, bool& member) {
  ASSIGN_OR_RETURN(member, FlagValue(field));
  return absl::OkStatus();
}

absl::Status FromFlag(const ts::Uint64Field& field, uint64_t& member) {
  ASSIGN_OR_RETURN(member, FlagValue(field));
  return absl::OkStatus();
}

// Prints usage and exits (absl::ParseCommandLine's --help). absl's --help lists the flags of
// a file named after the program (baton-trainer.cc), which baton-trainer has none of: list
// its own, the contract flags here and the tuning flags of trainer_main.cc.
[[noreturn]] void PrintUsageAndExit(int argc, char** argv) {
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [](absl::string_view file) {
    return absl::StrContains(file, "worker/trainer/");
  };
  absl::SetFlagsUsageConfig(config);
  absl::ParseCommandLine(argc, argv);
  std::exit(1);  // ParseCommandLine exits 1 after printing the usage; this is not reached.
}

}  // namespace

absl::Status ParseFlags(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view arg = argv[i];
    if (arg == "--help" || arg == "-help" || arg == "--helpfull") PrintUsageAndExit(argc, argv);
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
  absl::Status status;
  ForEachFlagOption(options, [&status](const auto& field, auto& member) {
    if (status.ok()) status = FromFlag(field, member);
  });
  RETURN_IF_ERROR(status);
  RETURN_IF_ERROR(ValidateTrainerOptions(options.trainer));
  DataOptions& data = options.data;
  RETURN_IF_ERROR(ts::CheckDataDir(data.dataset, data.data_dir, ts::Naming::kFlags));
  data.synthetic_tokens =
      ts::IsLanguageModel(options.trainer.model.model, options.trainer.model.task);
  return options;
}

}  // namespace baton::trainer
