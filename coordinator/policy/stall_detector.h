#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "baton/v1/job.pb.h"

namespace baton::coordinator {

// Stall detection for one generation of a job (pure: time is passed in). Fed the
// generation's metric points; Check() reports a stall when no live rank made progress for
// max(stall_factor x median step time, stall_floor) (the spec's RestartPolicy). Step time
// comes from the workers' point timestamps (one clock per rank), progress times from the
// coordinator's clock. Only once the generation reported a step: programs that report
// none are never "stalled". Not thread-safe.
class StallDetector {
 public:
  struct Stall {
    int32_t rank;           // the suspect: the live rank whose step counter stopped first
    std::string worker_id;  // its worker
    absl::Time since;       // the last progress of any live rank
    std::string cause;      // for the Failure record and the event
  };

  // Notes points of this generation that arrived at `now`.
  void Note(const std::vector<baton::v1::MetricPoint>& points, absl::Time now);
  // A stall of `job`'s live ranks (RankInfo without an exit) at `now`, if any.
  std::optional<Stall> Check(const baton::v1::Job& job, absl::Time now) const;
  // Median of the recent step times; zero before two steps of one rank.
  absl::Duration MedianStepTime() const;

 private:
  struct RankProgress {
    int64_t step = 0;
    absl::Time advanced;    // when the coordinator saw the step grow
    absl::Time point_time;  // the worker's timestamp of that point
  };
  std::map<int32_t, RankProgress> progress_;  // by rank
  std::deque<absl::Duration> step_times_;     // recent time-per-step samples, newest last
};

}  // namespace baton::coordinator
