#include "worker/trainer/progress/heartbeat.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "worker/trainer/contract/contract.h"

namespace baton::trainer {

MetricFields HeartbeatFields(int64_t seq, const ProgressTracker::Snapshot& s) {
  MetricFields f = {
      {kHeartbeatSeq, static_cast<double>(seq)},
      {kMetricStep, static_cast<double>(s.step)},
      {kHeartbeatPhase, static_cast<double>(static_cast<int>(s.phase))},
      {kHeartbeatInPhase, absl::ToDoubleSeconds(s.in_phase)},
      {kHeartbeatCollectives, static_cast<double>(s.collectives)},
      {kHeartbeatWaiting, s.waiting ? 1.0 : 0.0},
  };
  if (s.waiting) f.emplace_back(kHeartbeatWaited, absl::ToDoubleSeconds(s.waited));
  for (int p = 0; p < kTrainingPhases; ++p) {
    if (s.reference[p] <= absl::ZeroDuration()) continue;
    f.emplace_back(
        absl::StrCat(kHeartbeatReferencePrefix, TrainingPhaseName(static_cast<TrainingPhase>(p)),
                     kHeartbeatReferenceSuffix),
        absl::ToDoubleSeconds(s.reference[p]));
  }
  return f;
}

Heartbeat::Heartbeat(const ProgressTracker* tracker, Clock* clock, int fd, absl::Duration interval)
    : tracker_(tracker), clock_(clock), writer_(fd), interval_(interval) {
  if (fd >= 0 && interval > absl::ZeroDuration()) thread_ = std::thread([this] { Run(); });
}

Heartbeat::~Heartbeat() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Heartbeat::Run() {
  int64_t seq = 0;
  absl::Time next = clock_->Now();
  while (true) {
    const ProgressTracker::Snapshot s = tracker_->Take();
    if (!s.parked && !writer_.Write(HeartbeatFields(++seq, s)).ok()) return;
    next += interval_;
    absl::MutexLock lock(&mu_);
    const absl::Condition stopped(
        +[](bool* stop) { return *stop; }, &stop_);
    if (clock_->AwaitWithDeadline(&mu_, stopped, next)) return;
    // Fell behind (the process was not scheduled): beat now, not a burst of late beats.
    next = std::max(next, clock_->Now());
  }
}

}  // namespace baton::trainer
