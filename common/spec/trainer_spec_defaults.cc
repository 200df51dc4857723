#include "common/spec/trainer_spec_defaults.h"

#include <charconv>
#include <cmath>
#include <type_traits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace baton::trainer_spec {
namespace {

absl::Status OutOfRange(absl::string_view label, absl::string_view value, absl::string_view allowed,
                        absl::string_view note) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", value, " is out of range; must be ",
                                                 allowed, note.empty() ? "" : " (", note,
                                                 note.empty() ? "" : ")"));
}

std::string IntAllowed(int64_t min, int64_t max) {
  if (max == kInt64Max) return absl::StrCat(">= ", min);
  return absl::StrCat(min, "..", max);
}

std::string RealAllowed(const RealField& f) {
  if (f.hi == kInfinity) {
    return absl::StrCat("a finite number ", f.lo_closed ? ">= " : "> ", f.lo);
  }
  return absl::StrCat("in ", f.lo_closed ? "[" : "(", f.lo, ", ", f.hi, f.hi_closed ? "]" : ")");
}

}  // namespace

absl::Status Check(const IntField& field, int64_t value, absl::string_view label) {
  if (value >= field.min && value <= field.max) return absl::OkStatus();
  return OutOfRange(label, absl::StrCat(value), IntAllowed(field.min, field.max), field.note);
}

absl::Status Check(const RealField& field, double value, absl::string_view label) {
  const bool above_lo = field.lo_closed ? value >= field.lo : value > field.lo;
  const bool below_hi = field.hi_closed ? value <= field.hi : value < field.hi;
  if (std::isfinite(value) && above_lo && below_hi) return absl::OkStatus();
  return OutOfRange(label, absl::StrCat(value), RealAllowed(field), field.note);
}

absl::Status Check(const ChoiceField& field, absl::string_view value, absl::string_view label) {
  for (absl::string_view allowed : field.allowed) {
    if (value == allowed) return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      label, ": '", value, "' is not supported; allowed: ", absl::StrJoin(field.allowed, ", ")));
}

absl::Status Check(const ListField& field, absl::Span<const int64_t> values,
                   absl::string_view label) {
  if (values.size() > static_cast<size_t>(field.max_count)) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", values.size(), " ", field.unit,
                                                   " is too many; at most ", field.max_count));
  }
  for (size_t i = 0; i < values.size(); ++i) {
    if (values[i] < field.min || values[i] > field.max) {
      return OutOfRange(absl::StrCat(label, "[", i, "]"), absl::StrCat(values[i]),
                        IntAllowed(field.min, field.max), "");
    }
  }
  return absl::OkStatus();
}

std::string RealText(double value) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::general);
  return std::string(buf, result.ptr);
}

std::string ListText(absl::Span<const int64_t> values) { return absl::StrJoin(values, ","); }

absl::Span<const AnyField> TrainerSpecFields() {
  static constexpr AnyField kFields[] = {
      &kModel,
      &kDataset,
      &kDataDir,
      &kBatchSize,
      &kLr,
      &kMomentum,
      &kSeed,
      &kHidden,
      &kLogEvery,
      &kThreads,
      &kPrecision,
      &kAccumulationSteps,
      &kBucketCapMb,
      &kGradCompression,
      &kMaxGradNorm,
      &kOptimizer,
      &kWeightDecay,
      &kNesterov,
      &kAdamBeta1,
      &kAdamBeta2,
      &kAdamEps,
      &kLrSchedule,
      &kWarmupSteps,
      &kLrStepSize,
      &kLrGamma,
      &kMinLr,
      &kBaseBatch,
      &kLoaderThreads,
      &kPrefetchBatches,
      &kImageSize,
      &kContextLength,
      &kSyntheticSamples,
      &kNumClasses,
      &kGptLayers,
      &kGptHeads,
      &kGptWidth,
      &kVocabSize,
      &kTorchscriptPath,
      &kTask,
      &kCheckpointEvery,
      &kKeepCheckpoints,
      &kSnapshotEvery,
      &kEvalEvery,
      &kGlobalBatch,
      &kSampleLog,
      &kActivationCheckpointing,
      &kZeroStage,
      &kZeroOffloadOptimizer,
      &kPipelineStages,
      &kPipelineMicroBatches,
      &kPipelineSchedule,
  };
  return kFields;
}

absl::Span<const AnyField> TrainerFlagFields() {
  static const auto* const fields = [] {
    auto* all = new std::vector<AnyField>(TrainerSpecFields().begin(), TrainerSpecFields().end());
    all->insert(all->end(), {&kMaxSteps, &kMaxEpochs, &kCheckpointDir});
    return all;
  }();
  return *fields;
}

absl::string_view FieldName(const AnyField& field) {
  return std::visit([](const auto* f) { return f->name; }, field);
}

absl::string_view FieldHelp(const AnyField& field) {
  return std::visit([](const auto* f) { return f->help; }, field);
}

std::string DefaultText(const AnyField& field) {
  return std::visit(
      [](const auto* f) -> std::string {
        using Field = std::decay_t<decltype(*f)>;
        if constexpr (std::is_same_v<Field, RealField>) {
          return RealText(f->default_value);
        } else if constexpr (std::is_same_v<Field, ListField>) {
          return ListText(f->default_value);
        } else if constexpr (std::is_same_v<Field, BoolField>) {
          return f->default_value ? "true" : "false";
        } else if constexpr (std::is_same_v<Field, ChoiceField> ||
                             std::is_same_v<Field, TextField>) {
          return std::string(f->default_value);
        } else {
          return absl::StrCat(f->default_value);
        }
      },
      field);
}

}  // namespace baton::trainer_spec
