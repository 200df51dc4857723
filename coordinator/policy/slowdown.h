#pragma once

// Slowdown of a job's ranks and straggler detection, from the job's metric points. Pure
// code (no clock, no threads): the coordinator's metrics export the ratios
// (baton_rank_slowdown_ratio) and the JobManager records a "Straggler" job event.
//
// Slowdown ratio of rank r = r's recent step time / the median over the job's ranks of
// their recent step times, where a rank's recent step time is the mean of its own work per
// step over its last `window` metric points of the job's newest generation: time_step_s
// less time_comm_wait_s when the point has it (in synchronous data parallelism every rank's
// step lasts as long as the slowest's, the others waiting for it in the all-reduce; the
// built-in trainer reports both), else time_step_s. Defined with at least two ranks
// reporting and a positive median.
//
// Straggler: a rank whose slowdown ratio, evaluated at each of its metric points, was
// above `threshold` at `window` consecutive points of its own in one generation. Reported
// once per generation and rank.

#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>

#include "baton/v1/job.pb.h"

namespace baton::coordinator {

// Default points per rank averaged for the slowdown ratio (and a straggler's window).
inline constexpr int kDefaultSlowdownWindow = 3;
// Default slowdown ratio above which a rank is a straggler.
inline constexpr double kDefaultStragglerThreshold = 1.3;

// The recent step times of one job's ranks. A value type; not thread-safe.
class Slowdown {
 public:
  // `window` < 1 is taken as 1.
  explicit Slowdown(int window = kDefaultSlowdownWindow);

  // Folds in the job's next metric point. A point of a newer generation than any before
  // starts over (the ranks of the old one are forgotten); points of older generations and
  // points without time_step_s are ignored (returns false).
  bool Add(const baton::v1::MetricPoint& point);

  // The slowdown ratio of every rank that reported in the newest generation; empty with
  // fewer than two ranks or a median of 0.
  std::map<int32_t, double> Ratios() const;

  // The newest generation seen (0 before any point).
  int64_t generation() const { return generation_; }

 private:
  int window_;
  int64_t generation_ = 0;
  // Per rank, its last `window_` time_step_s values, oldest first.
  std::map<int32_t, std::deque<double>> step_times_;
};

// Finds stragglers in one job's metric points (see the file comment). Not thread-safe.
class StragglerDetector {
 public:
  struct Straggler {
    int64_t generation;
    int32_t rank;
    // The rank's slowdown ratio at the point that completed the window.
    double ratio;
  };

  // `window` < 1 is taken as 1.
  explicit StragglerDetector(int window = kDefaultSlowdownWindow,
                             double threshold = kDefaultStragglerThreshold);

  // Folds in the job's next metric point; returns the straggler it completes, if any (at
  // most once per generation and rank).
  std::optional<Straggler> Add(const baton::v1::MetricPoint& point);
  // Each rank's slowdown ratio in the newest generation (Slowdown::Ratios).
  std::map<int32_t, double> Ratios() const { return slowdown_.Ratios(); }
  // The ranks of the newest generation that straggle now: above the threshold at each of
  // their last `window` points (a rank that recovered is not among them), with their ratio.
  std::map<int32_t, double> Persistent() const;

 private:
  int window_;
  double threshold_;
  Slowdown slowdown_;
  // Newest generation: per rank, its consecutive points above the threshold, and the ranks
  // already reported.
  std::map<int32_t, int> above_;
  std::set<int32_t> reported_;
};

}  // namespace baton::coordinator
