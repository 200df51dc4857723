#pragma once

// One rank's training statistics between two metric lines (a window), and what a window
// becomes when it ends: the fields of the metric line (contract/contract.h) and the human-readable
// log line. Plain data and pure functions; the training loop owns the window.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "worker/trainer/contract/metrics_writer.h"
#include "worker/trainer/device/device.h"
#include "worker/trainer/step/phase_timer.h"

namespace baton::trainer {

struct TrainingWindow {
  int64_t steps = 0;          // Optimizer steps.
  int64_t micro_batches = 0;
  int64_t samples = 0;        // This rank's samples.
  int64_t count = 0;          // Accuracy denominator (samples or target tokens).
  at::Tensor loss_sum;        // Sum of micro-batch mean losses (double, on the device).
  at::Tensor correct;         // Sum of StepOutput::correct (int64, on the device).
  int64_t applied = 0;        // Steps whose update was applied.
  double grad_norm_sum = 0;   // Over applied steps.
  int64_t skipped = 0;        // Steps skipped for inf/NaN (fp16).
  PhaseTimes time;            // Summed over the window's steps.
  absl::Time start;           // When the window started (moved on by time not training).
};

// An empty window started at `now`, its sums on `device`.
TrainingWindow NewWindow(const c10::Device& device, absl::Time now);

// What the report of a window says besides the window's own statistics.
struct WindowFacts {
  int64_t step = 0;         // Optimizer steps done (global).
  int64_t epoch = 0;        // Epoch of the last step.
  int64_t total_steps = 0;  // The step budget.
  int world_size = 1;
  double lr = 0;            // Of the window's last step.
  int64_t tokens_per_sample = 0;  // > 0 for a language model: report tokens_per_sec.
  double comm_bytes = 0;          // Gradient bytes all-reduced per step.
  std::optional<double> loss_scale;  // Set with loss scaling (fp16).
  std::optional<DeviceMemory> memory;
  std::optional<double> eval_accuracy;
  absl::Time now;  // The window's end.
};

struct WindowReport {
  double loss = 0;      // Mean micro-batch loss; NaN without micro-batches.
  double accuracy = 0;  // correct / count; NaN when count is 0.
  MetricFields fields;  // The metric line, keys and order as contract/contract.h lists them.
  std::string line;     // "step 10/100 epoch 0 loss 0.6931 accuracy ... step_ms ... (data ...)".
};

// Reads the window's device sums (a device synchronisation) and reports it.
WindowReport ReportWindow(const TrainingWindow& window, const WindowFacts& facts);

}  // namespace baton::trainer
