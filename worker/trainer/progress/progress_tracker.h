#pragma once

// What a rank is doing, as its heartbeat tells the coordinator (contract.h, "Heartbeat
// lines"): the phase of training it is in and since when, the step, the collectives it
// started and whether it is blocked waiting for one, and per phase the longest of its
// recent completed durations (what the coordinator's hang detection learns timeouts from).
// Plain C++, no LibTorch.
//
// Threading: thread-safe. The training thread marks phases and steps, the communicator's
// callers mark collectives (the autograd thread starts all-reduces during backward), the
// heartbeat thread takes Snapshot()s.

#include <array>
#include <cstdint>
#include <deque>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"
#include "worker/trainer/contract/contract.h"

namespace baton::trainer {

class ProgressTracker {
 public:
  // Durations remembered per phase: the reference is the longest of the last this many.
  static constexpr size_t kWindow = 32;

  struct Snapshot {
    bool parked = false;  // between generations: nothing to report (Park())
    TrainingPhase phase = TrainingPhase::kStartup;
    absl::Duration in_phase;  // since the phase began
    int64_t step = 0;         // optimizer steps completed (global)
    int64_t collectives = 0;  // collectives this rank started in the process
    bool waiting = false;     // blocked in a collective's wait (or a blocking collective)
    absl::Duration waited;    // for how long, when waiting
    // Longest recent completed duration per phase (index: the phase's code); zero = none.
    std::array<absl::Duration, kTrainingPhases> reference{};
  };

  // `clock` must outlive the tracker. Starts in kStartup.
  explicit ProgressTracker(const Clock* clock);

  // Ends the current phase (its duration joins that phase's window) and begins `phase`.
  // Begin(kStartup) starts a new generation's startup (a rejoining process). While in
  // kStartup, Begin() of any other phase is ignored until StepDone() was called once: the
  // first step, and an epoch boundary inside it, belong to the startup.
  void Begin(TrainingPhase phase);
  // The process left its generation and waits to join the next (rejoin_protocol.h): it
  // has no phase to report, so Take() says `parked` until the next Begin(kStartup).
  void Park();
  // An optimizer step completed; `step` is the global count.
  void StepDone(int64_t step);

  // Collectives (TrackedCommunicator): one started; this rank began / stopped waiting.
  void CollectiveStarted();
  void WaitBegin();
  void WaitEnd();

  Snapshot Take() const;

 private:
  void EndPhaseLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const Clock* const clock_;
  mutable absl::Mutex mu_;
  TrainingPhase phase_ ABSL_GUARDED_BY(mu_) = TrainingPhase::kStartup;
  absl::Time phase_start_ ABSL_GUARDED_BY(mu_);
  bool stepped_since_startup_ ABSL_GUARDED_BY(mu_) = false;
  bool parked_ ABSL_GUARDED_BY(mu_) = false;
  int64_t step_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t collectives_ ABSL_GUARDED_BY(mu_) = 0;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;  // nested waits (a blocking collective's own wait)
  absl::Time wait_start_ ABSL_GUARDED_BY(mu_);
  std::array<std::deque<absl::Duration>, kTrainingPhases> windows_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::trainer
