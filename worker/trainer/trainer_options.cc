#include "worker/trainer/trainer_options.h"

#include <type_traits>

#include "common/spec/trainer_rules.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"

namespace baton::trainer {
namespace {

namespace ts = ::baton::trainer_spec;

constexpr ts::Naming kFlags = ts::Naming::kFlags;

// An option against its entry's range (ts::Check), labelled "--<name>". One overload per
// kind of entry and the member type that holds it, so that ForEachTableOption pairing an
// entry with a member of another type does not compile.
template <typename Field, typename Value>
absl::Status CheckOption(const Field&, const Value&) = delete;

template <typename Int,
          typename = std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>>>
absl::Status CheckOption(const ts::IntField& field, const Int& value) {
  return ts::Check(field, value, ts::FlagLabel(field));
}
absl::Status CheckOption(const ts::RealField& field, const double& value) {
  return ts::Check(field, value, ts::FlagLabel(field));
}
absl::Status CheckOption(const ts::ChoiceField& field, const std::string& value) {
  return ts::Check(field, value, ts::FlagLabel(field));
}
absl::Status CheckOption(const ts::ListField& field, const std::vector<int64_t>& value) {
  return ts::Check(field, value, ts::FlagLabel(field));
}
// Every value allowed: free text, any seed, either boolean, a parsed choice.
absl::Status CheckOption(const ts::TextField&, const std::string&) { return absl::OkStatus(); }
absl::Status CheckOption(const ts::Uint64Field&, const uint64_t&) { return absl::OkStatus(); }
absl::Status CheckOption(const ts::BoolField&, const bool&) { return absl::OkStatus(); }
absl::Status CheckOption(const ts::ChoiceField&, const Precision&) { return absl::OkStatus(); }
absl::Status CheckOption(const ts::ChoiceField&, const GradCompression&) {
  return absl::OkStatus();
}

// --grad_compression's name of `compression`.
absl::string_view CompressionName(GradCompression compression) {
  switch (compression) {
    case GradCompression::kNone:
      return "none";
    case GradCompression::kBf16:
      return "bf16";
    case GradCompression::kFp16:
      return "fp16";
  }
  return "none";
}

// The rules between options (common/spec/trainer_rules.h), once each passed its own check.
absl::Status CheckRules(const TrainerOptions& o) {
  const ModelOptions& m = o.model;
  RETURN_IF_ERROR(ts::CheckActivationCheckpointing(m.activation_checkpointing, m.model, kFlags));
  RETURN_IF_ERROR(
      ts::CheckNesterov(o.optimizer.nesterov, o.optimizer.name, o.optimizer.momentum, kFlags));
  RETURN_IF_ERROR(ts::CheckLrStepSize(o.schedule.kind, o.schedule.step_size, kFlags));
  RETURN_IF_ERROR(ts::CheckGlobalBatch(o.global_batch, o.step.accumulation_steps, kFlags));
  const absl::string_view compression = CompressionName(o.step.reducer.compression);
  RETURN_IF_ERROR(
      ts::CheckZeroCombination(o.zero_stage, o.zero_offload_optimizer, compression, kFlags));
  RETURN_IF_ERROR(
      ts::CheckPipeline({o.pipeline_stages, o.pipeline_micro_batches, m.model, m.gpt_layers,
                         static_cast<int64_t>(m.hidden.size()) + 1, o.batch_size, o.zero_stage,
                         m.activation_checkpointing, PrecisionName(o.step.precision),
                         o.step.accumulation_steps, compression},
                        kFlags));
  RETURN_IF_ERROR(ts::CheckSampleLog(o.sample_log, o.pipeline_stages, kFlags));
  return ts::CheckBudget(o.max_steps, o.max_epochs, kFlags);
}

}  // namespace

absl::Status ValidateTrainerOptions(const TrainerOptions& o) {
  absl::Status status;
  ForEachTableOption(o, [&status](const auto& field, const auto& value) {
    if (status.ok()) status = CheckOption(field, value);
  });
  RETURN_IF_ERROR(status);
  return CheckRules(o);
}

}  // namespace baton::trainer
