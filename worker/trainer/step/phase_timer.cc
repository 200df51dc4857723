#include "worker/trainer/step/phase_timer.h"

#include <algorithm>
#include <utility>

namespace baton::trainer {

PhaseTimes& PhaseTimes::operator+=(const PhaseTimes& other) {
  step += other.step;
  data += other.data;
  forward += other.forward;
  backward += other.backward;
  comm_wait += other.comm_wait;
  optimizer += other.optimizer;
  return *this;
}

absl::Duration PhaseTimes::PhaseSum() const {
  return data + forward + backward + comm_wait + optimizer;
}

void PhaseTimer::Start() {
  times_ = PhaseTimes();
  start_ = mark_ = clock_.Now();
}

void PhaseTimer::Lap(Phase phase) {
  const absl::Time now = clock_.Now();
  Slot(phase) += now - mark_;
  Record(phase, mark_, now - mark_);
  mark_ = now;
}

void PhaseTimer::LapSplit(Phase first, absl::Duration first_part, Phase rest) {
  const absl::Time now = clock_.Now();
  const absl::Duration elapsed = now - mark_;
  const absl::Duration head = std::min(std::max(first_part, absl::ZeroDuration()),
                                       std::max(elapsed, absl::ZeroDuration()));
  Slot(first) += head;
  Slot(rest) += elapsed - head;
  Record(first, mark_, head);
  Record(rest, mark_ + head, elapsed - head);
  mark_ = now;
}

void PhaseTimer::Record(Phase phase, absl::Time start, absl::Duration duration) {
  if (trace_ == nullptr) return;
  TraceSpan span;
  span.name = PhaseName(phase);
  span.category = "step";
  span.start = start;
  span.duration = duration;
  span.int_args["step"] = trace_step_;
  trace_->Record(std::move(span));
}

const char* PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kData:
      return "data";
    case Phase::kForward:
      return "forward";
    case Phase::kBackward:
      return "backward";
    case Phase::kCommWait:
      return "comm_wait";
    case Phase::kOptimizer:
      return "optimizer";
  }
  return "unknown";
}

PhaseTimes PhaseTimer::Stop() {
  times_.step = mark_ - start_;
  PhaseTimes done = times_;
  times_ = PhaseTimes();
  return done;
}

absl::Duration& PhaseTimer::Slot(Phase phase) {
  switch (phase) {
    case Phase::kData:
      return times_.data;
    case Phase::kForward:
      return times_.forward;
    case Phase::kBackward:
      return times_.backward;
    case Phase::kCommWait:
      return times_.comm_wait;
    case Phase::kOptimizer:
      break;
  }
  return times_.optimizer;
}

}  // namespace baton::trainer
