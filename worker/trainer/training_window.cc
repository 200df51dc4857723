#include "worker/trainer/training_window.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/trainer/contract/contract.h"

namespace baton::trainer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

std::string FormatOrNan(double v, const char* format) {
  return std::isfinite(v) ? absl::StrFormat(format, v) : "nan";
}

// Mean loss, accuracy and the global sample rate of the window.
struct Rates {
  double loss;
  double accuracy;
  double samples_per_sec;
};

Rates RatesOf(const TrainingWindow& w, const WindowFacts& facts) {
  const double elapsed = Seconds(facts.now - w.start);
  const double micro = static_cast<double>(std::max<int64_t>(w.micro_batches, 1));
  Rates r;
  r.loss = w.micro_batches > 0 ? w.loss_sum.item<double>() / micro : kNaN;
  r.accuracy =
      w.count > 0 ? static_cast<double>(w.correct.item<int64_t>()) / w.count : kNaN;
  const double global_samples = static_cast<double>(w.samples) * facts.world_size;
  r.samples_per_sec = elapsed > 0 ? global_samples / elapsed : kNaN;
  return r;
}

MetricFields FieldsOf(const TrainingWindow& w, const WindowFacts& facts, const Rates& r) {
  const double steps = static_cast<double>(std::max<int64_t>(w.steps, 1));
  MetricFields fields = {{kMetricStep, static_cast<double>(facts.step)},
                         {kMetricEpoch, static_cast<double>(facts.epoch)},
                         {kMetricLoss, r.loss},
                         {kMetricAccuracy, r.accuracy},
                         {kMetricSamplesPerSec, r.samples_per_sec},
                         {kMetricLr, facts.lr}};
  if (facts.tokens_per_sample > 0) {
    fields.emplace_back(kMetricTokensPerSec, r.samples_per_sec * facts.tokens_per_sample);
  }
  fields.emplace_back(kMetricTimeStep, Seconds(w.time.step) / steps);
  fields.emplace_back(kMetricTimeData, Seconds(w.time.data) / steps);
  fields.emplace_back(kMetricTimeForward, Seconds(w.time.forward) / steps);
  fields.emplace_back(kMetricTimeBackward, Seconds(w.time.backward) / steps);
  fields.emplace_back(kMetricTimeCommWait, Seconds(w.time.comm_wait) / steps);
  fields.emplace_back(kMetricTimeOptimizer, Seconds(w.time.optimizer) / steps);
  fields.emplace_back(kMetricCommBytes, facts.comm_bytes);
  fields.emplace_back(kMetricGradNorm, w.applied > 0 ? w.grad_norm_sum / w.applied : kNaN);
  if (facts.loss_scale.has_value()) {
    fields.emplace_back(kMetricLossScale, *facts.loss_scale);
    fields.emplace_back(kMetricSkippedSteps, static_cast<double>(w.skipped));
  }
  if (facts.memory.has_value()) {
    fields.emplace_back(kMetricMemAllocated, static_cast<double>(facts.memory->allocated_bytes));
    fields.emplace_back(kMetricMemReserved, static_cast<double>(facts.memory->reserved_bytes));
    fields.emplace_back(kMetricMemPeak, static_cast<double>(facts.memory->peak_allocated_bytes));
  }
  if (facts.eval_accuracy.has_value()) {
    fields.emplace_back(kMetricEvalAccuracy, *facts.eval_accuracy);
  }
  return fields;
}

std::string LineOf(const TrainingWindow& w, const WindowFacts& facts, const Rates& r) {
  const double ms = 1000.0 / static_cast<double>(std::max<int64_t>(w.steps, 1));
  std::string line = absl::StrFormat(
      "step %d/%d epoch %d loss %s accuracy %s samples/s %s lr %g step_ms %.1f (data %.1f "
      "fwd %.1f bwd %.1f comm %.1f opt %.1f)",
      facts.step, facts.total_steps, facts.epoch, FormatOrNan(r.loss, "%.4f"),
      FormatOrNan(r.accuracy, "%.4f"), FormatOrNan(r.samples_per_sec, "%.0f"), facts.lr,
      Seconds(w.time.step) * ms, Seconds(w.time.data) * ms, Seconds(w.time.forward) * ms,
      Seconds(w.time.backward) * ms, Seconds(w.time.comm_wait) * ms,
      Seconds(w.time.optimizer) * ms);
  if (facts.loss_scale.has_value()) {
    absl::StrAppend(&line,
                    absl::StrFormat(" loss_scale %g skipped %d", *facts.loss_scale, w.skipped));
  }
  if (facts.eval_accuracy.has_value()) {
    absl::StrAppend(&line, " eval_accuracy ", FormatOrNan(*facts.eval_accuracy, "%.4f"));
  }
  return line;
}

}  // namespace

TrainingWindow NewWindow(const c10::Device& device, absl::Time now) {
  const at::TensorOptions on_device = at::TensorOptions().device(device);
  TrainingWindow window;
  window.loss_sum = at::zeros({}, on_device.dtype(at::kDouble));
  window.correct = at::zeros({}, on_device.dtype(at::kLong));
  window.start = now;
  return window;
}

WindowReport ReportWindow(const TrainingWindow& window, const WindowFacts& facts) {
  const Rates rates = RatesOf(window, facts);
  WindowReport report;
  report.loss = rates.loss;
  report.accuracy = rates.accuracy;
  report.fields = FieldsOf(window, facts, rates);
  report.line = LineOf(window, facts, rates);
  return report;
}

}  // namespace baton::trainer
