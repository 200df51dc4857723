#include "worker/trainer/optim/lr_schedule.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace baton::trainer {
namespace {

constexpr double kPi = 3.14159265358979323846;

absl::Status Bad(absl::string_view field, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("trainer.", field, ": ", what));
}

}  // namespace

double ScaledLearningRate(double lr, int64_t global_batch, int64_t base_batch) {
  if (base_batch <= 0) return lr;
  return lr * static_cast<double>(global_batch) / static_cast<double>(base_batch);
}

absl::StatusOr<LrSchedule> LrSchedule::Create(const LrScheduleOptions& o) {
  LrScheduleKind kind;
  if (o.kind.empty() || o.kind == "constant") {
    kind = LrScheduleKind::kConstant;
  } else if (o.kind == "cosine") {
    kind = LrScheduleKind::kCosine;
  } else if (o.kind == "step") {
    kind = LrScheduleKind::kStep;
  } else {
    return Bad("lr_schedule",
               absl::StrCat("unknown schedule \"", o.kind, "\" (want constant, cosine or step)"));
  }
  if (!(o.base_lr > 0) || !std::isfinite(o.base_lr)) return Bad("lr", "must be a positive number");
  if (o.warmup_steps < 0) return Bad("warmup_steps", "must be >= 0");
  if (o.base_batch < 0) return Bad("base_batch", "must be >= 0");
  if (o.base_batch > 0 && o.global_batch <= 0) {
    return Bad("base_batch", "linear scaling needs a positive global batch");
  }
  const double peak = ScaledLearningRate(o.base_lr, o.global_batch, o.base_batch);
  if (kind == LrScheduleKind::kCosine) {
    if (o.total_steps <= 0) {
      return Bad("lr_schedule", "cosine needs a step budget (budget.max_steps or max_epochs)");
    }
    if (o.warmup_steps >= o.total_steps) {
      return Bad("warmup_steps", "must be less than the step budget for cosine");
    }
    if (!(o.min_lr >= 0) || !std::isfinite(o.min_lr)) return Bad("min_lr", "must be >= 0");
    if (o.min_lr > peak) return Bad("min_lr", "must not exceed the (scaled) peak lr");
  }
  if (kind == LrScheduleKind::kStep) {
    if (o.step_size <= 0) return Bad("lr_step_size", "must be > 0 for the step schedule");
    if (!(o.gamma > 0) || !std::isfinite(o.gamma)) return Bad("lr_gamma", "must be > 0");
  }
  return LrSchedule(kind, o, peak);
}

double LrSchedule::LrAt(int64_t step) const {
  step = std::max<int64_t>(step, 0);
  const int64_t warmup = options_.warmup_steps;
  if (step < warmup) {
    return peak_lr_ * static_cast<double>(step + 1) / static_cast<double>(warmup);
  }
  const int64_t since = step - warmup;
  switch (kind_) {
    case LrScheduleKind::kConstant:
      return peak_lr_;
    case LrScheduleKind::kCosine: {
      const int64_t span = std::max<int64_t>(1, options_.total_steps - warmup);
      const double progress = std::min(1.0, static_cast<double>(since) / static_cast<double>(span));
      return options_.min_lr +
             (peak_lr_ - options_.min_lr) * 0.5 * (1.0 + std::cos(kPi * progress));
    }
    case LrScheduleKind::kStep:
      return peak_lr_ * std::pow(options_.gamma, static_cast<double>(since / options_.step_size));
  }
  return peak_lr_;
}

}  // namespace baton::trainer
