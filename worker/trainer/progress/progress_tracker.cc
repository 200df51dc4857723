#include "worker/trainer/progress/progress_tracker.h"

#include <algorithm>

namespace baton::trainer {

ProgressTracker::ProgressTracker(const Clock* clock) : clock_(clock) {
  phase_start_ = clock_->Now();
}

void ProgressTracker::EndPhaseLocked(absl::Time now) {
  std::deque<absl::Duration>& window = windows_[static_cast<int>(phase_)];
  window.push_back(now - phase_start_);
  if (window.size() > kWindow) window.pop_front();
}

void ProgressTracker::Park() {
  absl::MutexLock lock(&mu_);
  parked_ = true;
}

void ProgressTracker::Begin(TrainingPhase phase) {
  absl::MutexLock lock(&mu_);
  if (parked_ && phase != TrainingPhase::kStartup) return;
  if (phase_ == TrainingPhase::kStartup && phase != TrainingPhase::kStartup &&
      !stepped_since_startup_) {
    return;
  }
  const absl::Time now = clock_->Now();
  // A rejoin's startup ends nothing that completed: the old generation's phase was cut off.
  if (phase != TrainingPhase::kStartup) EndPhaseLocked(now);
  if (phase == TrainingPhase::kStartup) {
    stepped_since_startup_ = false;
    parked_ = false;
  }
  phase_ = phase;
  phase_start_ = now;
}

void ProgressTracker::StepDone(int64_t step) {
  absl::MutexLock lock(&mu_);
  step_ = step;
  stepped_since_startup_ = true;
}

void ProgressTracker::CollectiveStarted() {
  absl::MutexLock lock(&mu_);
  ++collectives_;
}

void ProgressTracker::WaitBegin() {
  absl::MutexLock lock(&mu_);
  if (waiting_++ == 0) wait_start_ = clock_->Now();
}

void ProgressTracker::WaitEnd() {
  absl::MutexLock lock(&mu_);
  if (waiting_ > 0) --waiting_;
}

ProgressTracker::Snapshot ProgressTracker::Take() const {
  absl::MutexLock lock(&mu_);
  const absl::Time now = clock_->Now();
  Snapshot s;
  s.parked = parked_;
  s.phase = phase_;
  s.in_phase = now - phase_start_;
  s.step = step_;
  s.collectives = collectives_;
  s.waiting = waiting_ > 0;
  if (s.waiting) s.waited = now - wait_start_;
  for (int p = 0; p < kTrainingPhases; ++p) {
    for (const absl::Duration d : windows_[p]) s.reference[p] = std::max(s.reference[p], d);
  }
  return s;
}

}  // namespace baton::trainer
