#pragma once

// Splits the time of each optimizer step, read from an injected Clock, into the phases the
// metric lines report (contract/contract.h: time_data_s ... time_optimizer_s). The phases partition
// the step: every instant between Start() and the last lap belongs to exactly one phase,
// so they sum to the step's time exactly, whatever the clock does between calls.
// Plain C++; thread-compatible (one training thread uses it).

#include <cstdint>

#include "absl/time/time.h"
#include "common/time/clock.h"
#include "worker/trainer/profile/trace.h"

namespace baton::trainer {

// Time of each phase, for one step or summed over several. step is the whole step.
struct PhaseTimes {
  absl::Duration step, data, forward, backward, comm_wait, optimizer;

  PhaseTimes& operator+=(const PhaseTimes& other);
  // data + forward + backward + comm_wait + optimizer.
  absl::Duration PhaseSum() const;
};

enum class Phase { kData, kForward, kBackward, kCommWait, kOptimizer };

class PhaseTimer {
 public:
  // `clock` is borrowed and must outlive the timer.
  explicit PhaseTimer(const Clock& clock) : clock_(clock) {}

  // Starts a step: the clock's time now is its start and the first mark.
  void Start();
  // Charges the time since the last mark to `phase`; now becomes the mark.
  void Lap(Phase phase);
  // Lap split in two: `first` gets `first_part` (at most the time since the mark; a
  // duration measured inside the lap, e.g. the all-reduce wait), `rest` the remainder.
  void LapSplit(Phase first, absl::Duration first_part, Phase rest);
  // Ends the step at the last mark (time after it is not counted: lap first) and returns
  // its times; step == PhaseSum() exactly. The timer is then ready for Start().
  PhaseTimes Stop();

  // Step profiling: while `recorder` is set, every lap is also recorded as a span named
  // after its phase ("data", "forward", "backward", "comm_wait", "optimizer"; category
  // "step", args.step = `step`) on thread kTrainingTraceThread; a split lap gives two
  // spans. Null stops recording. `recorder` must outlive its use.
  void SetTrace(TraceRecorder* recorder, int64_t step) {
    trace_ = recorder;
    trace_step_ = step;
  }

 private:
  absl::Duration& Slot(Phase phase);
  void Record(Phase phase, absl::Time start, absl::Duration duration);

  const Clock& clock_;
  absl::Time start_;
  absl::Time mark_;
  PhaseTimes times_;  // Of the current step.
  TraceRecorder* trace_ = nullptr;
  int64_t trace_step_ = 0;
};

// "data", "forward", "backward", "comm_wait", "optimizer".
const char* PhaseName(Phase phase);

}  // namespace baton::trainer
