#pragma once

// The learning rate as a pure function of the GLOBAL optimizer step, so a resize or a
// restart from a checkpoint continues the same curve (the step counter is checkpointed;
// nothing else is). Plain C++, no LibTorch; immutable after construction, thread-safe.
//
// `step` counts completed optimizer steps: LrAt(s) is the lr used by the (s+1)-th update,
// s = 0, 1, 2, ...  With W = warmup_steps and peak = the (scaled) base lr:
//
//   warmup (all kinds, when W > 0 and s < W):  peak * (s + 1) / W
//   "constant":  peak
//   "cosine":    p = min(1, (s - W) / max(1, total_steps - W));
//                min_lr + (peak - min_lr) * (1 + cos(pi * p)) / 2   (reaches min_lr at
//                s = total_steps and stays there). Needs total_steps > 0.
//   "step":      peak * gamma ^ floor((s - W) / step_size)
//
// Linear scaling rule (TrainerSpec.base_batch > 0): peak = lr * global_batch / base_batch,
// global_batch = batch_size * accumulation_steps * world_size. min_lr is not scaled.
// Because world_size enters the peak, a resize changes the lr level (as the rule
// intends) but never the position on the curve.

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "common/spec/trainer_spec_defaults.h"

namespace baton::trainer {

enum class LrScheduleKind { kConstant, kCosine, kStep };

// The TrainerSpec schedule fields; defaults: common/spec/trainer_spec_defaults.h.
struct LrScheduleOptions {
  // TrainerSpec.lr_schedule: "constant" ("" too), "cosine", "step".
  std::string kind = std::string(trainer_spec::kLrSchedule.default_value);
  double base_lr = trainer_spec::kLr.default_value;  // TrainerSpec.lr, > 0.
  int64_t warmup_steps = trainer_spec::kWarmupSteps.default_value;  // >= 0.
  int64_t total_steps = 0;  // The step budget; "cosine" needs > 0 (> warmup_steps).
  int64_t step_size = trainer_spec::kLrStepSize.default_value;  // "step": > 0.
  double gamma = trainer_spec::kLrGamma.default_value;          // "step": > 0.
  double min_lr = trainer_spec::kMinLr.default_value;           // "cosine": in [0, peak].
  // 0: no linear scaling; else > 0.
  int64_t base_batch = trainer_spec::kBaseBatch.default_value;
  int64_t global_batch = 0;  // Needed (> 0) when base_batch > 0.
};

// lr * global_batch / base_batch when base_batch > 0, else lr.
double ScaledLearningRate(double lr, int64_t global_batch, int64_t base_batch);

class LrSchedule {
 public:
  // INVALID_ARGUMENT naming the TrainerSpec field ("trainer.lr_schedule", "trainer.warmup_steps",
  // "trainer.lr_step_size", "trainer.lr_gamma", "trainer.min_lr", "trainer.base_batch", ...).
  static absl::StatusOr<LrSchedule> Create(const LrScheduleOptions& options);

  // The lr for the update after `step` completed optimizer steps (step >= 0; negative
  // steps are treated as 0).
  double LrAt(int64_t step) const;

  // The scaled peak lr (lr after warmup for "constant").
  double peak_lr() const { return peak_lr_; }
  LrScheduleKind kind() const { return kind_; }

 private:
  LrSchedule(LrScheduleKind kind, const LrScheduleOptions& options, double peak_lr)
      : kind_(kind), options_(options), peak_lr_(peak_lr) {}

  LrScheduleKind kind_;
  LrScheduleOptions options_;
  double peak_lr_;
};

}  // namespace baton::trainer
