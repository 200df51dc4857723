#pragma once

// Goodput of a training job: the share of its wall time spent on steps that moved training
// forward. One definition for the coordinator's metric (baton_coordinator_job_goodput_ratio)
// and the job record (JobResult.goodput, shown by `baton describe`).
//
//   goodput    = min(1, productive / wall)
//   wall       = (end_time, or now while the job has not ended) - start_time, where
//                start_time is the job's first RENDEZVOUS; once the job ended the value is
//                frozen at end_time.
//   productive = sum over rank 0's metric points p, in the order they were recorded, of
//                time_step_s(p) x max(0, step(p) - the highest step rank 0 reported
//                before p).
//
// Steps recomputed after restoring an older checkpoint add nothing, so time lost to
// failures, restarts, rendezvous, checkpoint restores and recomputation all lower the
// ratio. A point without time_step_s still raises the highest step (its steps count as
// reported, with no time). Pure code: no clock, no threads.

#include <cstdint>
#include <optional>

#include "absl/time/time.h"
#include "baton/v1/job.pb.h"

namespace baton::coordinator {

// The productive step time of a job so far: what goodput needs of its metric points.
// A value type; fold points in with Add().
struct ProductiveTime {
  // Rank 0's highest step so far (0 before any point).
  int64_t max_step = 0;
  // Productive step time so far, seconds.
  double seconds = 0;

  // Folds in the job's next metric point (any generation). Points of ranks other than 0
  // are ignored, so callers may pass every point of the job.
  void Add(const baton::v1::MetricPoint& point);
};

// The goodput ratio in [0, 1] of a job with `productive` step time that started at
// `start` and ended at `end` (absl::InfiniteFuture() while it has not), evaluated at
// `now`. nullopt if the job has not started (start == absl::InfinitePast()) or no wall
// time has passed yet.
std::optional<double> GoodputRatio(const ProductiveTime& productive, absl::Time start,
                                   absl::Time end, absl::Time now);

}  // namespace baton::coordinator
