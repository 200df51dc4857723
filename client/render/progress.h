#pragma once

// Live progress of a watched job (`baton submit --wait`).
//
// ProgressTracker folds the WatchJob stream into what the user sees: the latest snapshot,
// rank 0's latest metric point and a step-rate window for the ETA. RenderProgressLine is
// a pure function of the tracker and the current time. ProgressPrinter decides when to
// print:
//   * on a terminal (TTY) the progress line is redrawn in place ("\r" + line + erase to
//     end of line) after every snapshot or rank-0 metric point; event lines are printed
//     above it (the line is cleared, the event printed, the line redrawn);
//   * otherwise (pipes, CI logs) each event is one line, and the progress line is printed
//     as a plain line for a rank-0 metric point at most once every `min_interval`
//     (default 2 s, by the injected clock); snapshots alone print nothing.
//
// Progress conventions (the coordinator and trainer must match them):
//   * total steps = spec.budget.max_steps when > 0; otherwise no total, percentage or ETA;
//   * only metric points with rank == 0 are used; MetricPoint.values keys "loss",
//     "accuracy" (a fraction in [0, 1], shown as a percentage) and "samples_per_sec";
//   * ETA = remaining steps / step rate, where the rate is measured from MetricPoint.time
//     and .step between the first and latest rank-0 point of the current generation
//     (a restart resets the window), minus the time elapsed since the latest point.
//
// Not thread-safe: one watch loop owns a tracker and a printer.

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"
#include "common/time/clock.h"

namespace baton::cli {

class ProgressTracker {
 public:
  ProgressTracker() = default;
  explicit ProgressTracker(const baton::v1::Job& job) : job_(job) {}

  // Folds one update in: a snapshot replaces the job, a state-change event updates the
  // job's state and generation, a rank-0 metric point moves the progress and rate window.
  void Apply(const baton::v1::JobUpdate& update);

  const baton::v1::Job& job() const { return job_; }
  // Highest seq seen (events and metrics; snapshots carry 0): the resume point.
  int64_t last_seq() const { return last_seq_; }
  // Rank 0's latest metric point, if any.
  const std::optional<baton::v1::MetricPoint>& latest_metric() const { return latest_; }
  // budget.max_steps when > 0, else 0 (unknown).
  int64_t total_steps() const { return job_.spec().budget().max_steps(); }
  // Steps per second over the current generation's window; nullopt until two points
  // with increasing step and time.
  std::optional<double> StepRate() const;
  // Estimated time left at `now`; nullopt without a total, a rate, or once terminal.
  std::optional<absl::Duration> Eta(absl::Time now) const;

 private:
  baton::v1::Job job_;
  int64_t last_seq_ = 0;
  std::optional<baton::v1::MetricPoint> latest_;
  std::optional<baton::v1::MetricPoint> window_start_;  // first rank-0 point of generation
};

// "step 1200/5000 (24%)  loss 0.3412  acc 91.2%  1234 samples/s  ETA 3m05s  RUNNING".
// Parts without data are left out; before any metric point it is just the state.
std::string RenderProgressLine(const ProgressTracker& tracker, absl::Time now);

class ProgressPrinter {
 public:
  // `out` and `clock` must outlive the printer.
  ProgressPrinter(std::ostream& out, bool tty, const Clock& clock, absl::TimeZone tz,
                  absl::Duration min_interval = absl::Seconds(2));

  // Call after tracker.Apply(update).
  void OnUpdate(const ProgressTracker& tracker, const baton::v1::JobUpdate& update);
  // Leaves the cursor on a fresh line (TTY: ends the redrawn line). Idempotent.
  void Finish();

 private:
  void Draw(const ProgressTracker& tracker);

  std::ostream& out_;
  const bool tty_;
  const Clock& clock_;
  const absl::TimeZone tz_;
  const absl::Duration min_interval_;
  bool line_drawn_ = false;  // TTY: a progress line is on screen without a newline
  std::optional<absl::Time> last_print_;  // non-TTY: last progress line
};

}  // namespace baton::cli
