#include "common/spec/trainer_spec_defaults.h"

#include <charconv>
#include <cmath>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace baton::trainer_spec {
namespace {

absl::Status OutOfRange(absl::string_view label, absl::string_view value,
                        absl::string_view allowed, absl::string_view note) {
  return absl::InvalidArgumentError(absl::StrCat(label, ": ", value,
                                                 " is out of range; must be ", allowed,
                                                 note.empty() ? "" : " (", note,
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
  return absl::InvalidArgumentError(absl::StrCat(label, ": '", value,
                                                 "' is not supported; allowed: ",
                                                 absl::StrJoin(field.allowed, ", ")));
}

absl::Status CheckZeroCombination(int64_t stage, bool offload_optimizer,
                                  absl::string_view grad_compression,
                                  absl::string_view stage_label, absl::string_view offload_label,
                                  absl::string_view compression_label) {
  if (offload_optimizer && stage == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(offload_label, ": true needs ", stage_label,
                     " 1 or 2 (the sharded optimizer state is what is offloaded); it is 0"));
  }
  if (stage == 2 && !grad_compression.empty() && grad_compression != "none") {
    return absl::InvalidArgumentError(absl::StrCat(
        stage_label, ": 2 cannot be combined with ", compression_label, "=", grad_compression,
        " (stage 2 reduce-scatters full-width gradients); use stage 1, or ", compression_label,
        "=none"));
  }
  return absl::OkStatus();
}

absl::Status CheckPipeline(const PipelineSettings& s, const PipelineLabels& labels) {
  if (s.stages <= 1) return absl::OkStatus();
  if (s.micro_batches < s.stages) {
    return absl::InvalidArgumentError(
        absl::StrCat(labels.micro_batches, ": ", s.micro_batches, " is fewer than the ",
                     s.stages, " stages; must be >= ", labels.stages));
  }
  if (s.model == "gpt") {
    if (s.gpt_layers % s.stages != 0) {
      return absl::InvalidArgumentError(absl::StrCat(labels.stages, ": ", s.stages,
                                                     " does not divide ", labels.gpt_layers, " ",
                                                     s.gpt_layers, "; must divide it"));
    }
  } else if (s.model == "mlp") {
    if (s.mlp_layers < s.stages) {
      return absl::InvalidArgumentError(absl::StrCat(
          labels.stages, ": ", s.stages, " stages for an mlp of ", s.mlp_layers,
          " layers; must be at most its layers (hidden widths + 1)"));
    }
  } else {
    return absl::InvalidArgumentError(absl::StrCat(labels.stages, ": model '", s.model,
                                                   "' cannot be split into stages; allowed "
                                                   "with models gpt and mlp"));
  }
  if (s.batch_size % s.micro_batches != 0) {
    return absl::InvalidArgumentError(absl::StrCat(labels.micro_batches, ": ", s.micro_batches,
                                                   " does not divide ", labels.batch_size, " ",
                                                   s.batch_size, "; must divide it"));
  }
  if (s.zero_stage > 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels.stages, ": pipeline parallelism is not supported with ", labels.zero_stage, " ",
        s.zero_stage, "; allowed with ", labels.zero_stage, " 0"));
  }
  if (s.activation_checkpointing != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat(labels.stages, ": pipeline parallelism is not supported with ",
                     labels.activation_checkpointing, " '", s.activation_checkpointing,
                     "'; allowed with 'none'"));
  }
  if (!s.precision.empty() && s.precision != "fp32") {
    return absl::InvalidArgumentError(absl::StrCat(
        labels.precision, ": '", s.precision, "' is not supported with pipeline parallelism (",
        labels.stages, " ", s.stages, "); allowed: fp32"));
  }
  if (s.accumulation_steps != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        labels.accumulation_steps, ": ", s.accumulation_steps,
        " is not supported with pipeline parallelism (", labels.stages, " ", s.stages,
        "); allowed: 1 (a pipeline accumulates over its ", labels.micro_batches, " instead)"));
  }
  if (!s.grad_compression.empty() && s.grad_compression != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat(labels.grad_compression, ": '", s.grad_compression,
                     "' is not supported with pipeline parallelism (", labels.stages, " ", s.stages,
                     "); allowed: none"));
  }
  return absl::OkStatus();
}

absl::Status Check(const ListField& field, absl::Span<const int64_t> values,
                   absl::string_view label) {
  if (values.size() > static_cast<size_t>(field.max_count)) {
    return absl::InvalidArgumentError(absl::StrCat(label, ": ", values.size(),
                                                   " ", field.unit,
                                                   " is too many; at most ",
                                                   field.max_count));
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
      &kModel,          &kDataset,       &kDataDir,         &kBatchSize,
      &kLr,             &kMomentum,      &kSeed,            &kHidden,
      &kLogEvery,       &kThreads,       &kPrecision,       &kAccumulationSteps,
      &kBucketCapMb,    &kGradCompression, &kMaxGradNorm,   &kOptimizer,
      &kWeightDecay,    &kNesterov,      &kAdamBeta1,       &kAdamBeta2,
      &kAdamEps,        &kLrSchedule,    &kWarmupSteps,     &kLrStepSize,
      &kLrGamma,        &kMinLr,         &kBaseBatch,       &kLoaderThreads,
      &kPrefetchBatches, &kImageSize,    &kContextLength,   &kSyntheticSamples,
      &kNumClasses,     &kGptLayers,     &kGptHeads,        &kGptWidth,
      &kVocabSize,      &kTorchscriptPath, &kTask,          &kCheckpointEvery,
      &kKeepCheckpoints, &kGlobalBatch,  &kSampleLog,      &kActivationCheckpointing,
      &kZeroStage,      &kZeroOffloadOptimizer, &kPipelineStages, &kPipelineMicroBatches,
      &kPipelineSchedule,
  };
  return kFields;
}

absl::string_view FieldName(const AnyField& field) {
  return std::visit([](const auto* f) { return f->name; }, field);
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
