#include "coordinator/policy/stall_detector.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/spec/job_spec.h"
#include "common/time/proto_time.h"

namespace baton::coordinator {
namespace {

constexpr size_t kStepTimeSamples = 64;

// A duration for messages: milliseconds from 1 s up, microseconds below.
std::string Rounded(absl::Duration d) {
  return absl::FormatDuration(
      absl::Trunc(d, d >= absl::Seconds(1) ? absl::Milliseconds(1) : absl::Microseconds(1)));
}

}  // namespace

void StallDetector::Note(const std::vector<baton::v1::MetricPoint>& points, absl::Time now) {
  for (const baton::v1::MetricPoint& p : points) {
    // Step time from the worker's timestamps (one clock per rank); ours if it sent none.
    const absl::Time point_time = p.has_time() ? FromProto(p.time()) : now;
    auto [it, fresh] = progress_.try_emplace(p.rank());
    RankProgress& rp = it->second;
    if (!fresh && p.step() <= rp.step) continue;
    if (!fresh && point_time > rp.point_time) {
      step_times_.push_back((point_time - rp.point_time) / (p.step() - rp.step));
      if (step_times_.size() > kStepTimeSamples) step_times_.pop_front();
    }
    rp.step = p.step();
    rp.advanced = now;
    rp.point_time = point_time;
  }
}

absl::Duration StallDetector::MedianStepTime() const {
  if (step_times_.empty()) return absl::ZeroDuration();
  std::vector<absl::Duration> sorted(step_times_.begin(), step_times_.end());
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  return sorted[sorted.size() / 2];
}

std::optional<StallDetector::Stall> StallDetector::Check(const baton::v1::Job& job,
                                                         absl::Time now) const {
  if (progress_.empty()) return std::nullopt;
  const baton::v1::RestartPolicy policy = RestartPolicyWithDefaults(job.spec().restart_policy());
  const absl::Duration median = MedianStepTime();
  const absl::Duration timeout =
      std::max(median * policy.stall_factor(), FromProto(policy.stall_floor()));
  // Live ranks only: one that exited is not stalled (and its exit is handled elsewhere).
  const baton::v1::RankInfo* suspect = nullptr;
  RankProgress suspect_progress;
  absl::Time latest = absl::InfinitePast();
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (r.has_exit()) continue;
    auto it = progress_.find(r.rank());
    // A live rank that never reported a step stopped before any that did.
    const RankProgress rp = it == progress_.end()
                                ? RankProgress{-1, absl::InfinitePast(), absl::InfinitePast()}
                                : it->second;
    if (it != progress_.end()) latest = std::max(latest, rp.advanced);
    if (suspect == nullptr || rp.step < suspect_progress.step ||
        (rp.step == suspect_progress.step && rp.advanced < suspect_progress.advanced)) {
      suspect = &r;
      suspect_progress = rp;
    }
  }
  if (suspect == nullptr || latest == absl::InfinitePast() || now - latest < timeout) {
    return std::nullopt;
  }
  Stall stall;
  stall.rank = suspect->rank();
  stall.worker_id = suspect->worker_id();
  stall.since = latest;
  stall.cause =
      absl::StrCat("no rank made progress for ", Rounded(now - latest), " (stall timeout ",
                   Rounded(timeout), " = max(", policy.stall_factor(), " x median step time ",
                   Rounded(median), ", ", Rounded(FromProto(policy.stall_floor())), ")); rank ",
                   suspect->rank(), " on worker ", suspect->worker_id(), " stopped first",
                   suspect_progress.step >= 0 ? absl::StrCat(" at step ", suspect_progress.step)
                                              : std::string(" before its first step"));
  return stall;
}

}  // namespace baton::coordinator
