#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"

namespace baton::coordinator {

// Hang detection for one generation of a job (pure: time is passed in), with timeouts
// learned from the job's own history, per phase of training. Inputs, all dated on the
// coordinator's clock:
//  - heartbeats (RankBeat; the built-in trainer beats every 100 ms from a thread of its
//    own): each rank's phase (startup, step, eval, checkpoint, epoch) and since when, its
//    step, the collectives it started and whether it waits for one, and per phase the
//    longest of its recent completed durations (the reference);
//  - metric points (every program that reports steps, e.g. the Python helper's report()):
//    the step and the time between reports;
//  - output (log lines), for the opt-in output-silence rule.
// Check() reports a hang (RestartPolicy, job.proto) when, for the live ranks (no exit):
//  1. silent: a rank that beats sent none for stall_floor and no rank made progress for
//     as long: the process does not run (SIGSTOP, a frozen host); it is the culprit;
//  2. stuck: the culprit (the rank that started the fewest collectives; among equals one
//     not waiting in a collective before one that waits; then the longest in its phase)
//     has been in its phase longer than the phase's timeout and no rank made progress for
//     as long. Phase timeout: the policy's phase_timeouts.<phase> if set, else stall_floor +
//     stall_factor x the phase's reference (the startup's floor is at least 30 s; a step
//     without history takes the startup's reference, which includes the generation's first
//     step; any other phase without history waits stall_unlearned). So a rank that checkpoints
//     while the others wait in the next step's collective is judged by the checkpoint's
//     timeout, and the waiting ranks are never named;
//  3. no report: ranks that report steps but do not beat: no rank's step advanced for
//     report_stall_floor + stall_factor x the longest recent time between a rank's reports
//     (stall_unlearned before two reports); the rank whose step stopped first is named;
//  4. output silence (only with restart_policy.output_silence): no live rank wrote output for
//     that long; the rank silent longest is named.
// References survive into the next generation (ForNextGeneration), so a restarted job is
// judged by what its earlier generations did. Not thread-safe.
class StallDetector {
 public:
  struct Stall {
    int32_t rank;           // the culprit
    std::string worker_id;  // its worker
    std::string phase;      // its phase ("report" / "output" for rules 3 and 4)
    std::string evidence;   // "silent", "stuck", "no-report", "output-silence"
    absl::Time since;       // when it stopped (its last beat, entering its phase, ...)
    std::string cause;      // for the Failure record and the event
  };

  // A detector for a generation that starts at `start` (ranks that have not beaten yet
  // count as in their startup since then).
  explicit StallDetector(absl::Time start = absl::InfinitePast()) : start_(start) {}

  // A detector for the job's next generation, starting at `start`, that keeps the
  // references learned so far.
  StallDetector ForNextGeneration(absl::Time start) const;

  // Notes points / heartbeats / output of this generation that arrived at `now`.
  void Note(const std::vector<baton::v1::MetricPoint>& points, absl::Time now);
  void NoteBeats(const std::vector<baton::v1::RankBeat>& beats, absl::Time now);
  void NoteOutput(int32_t rank, absl::Time now);
  // Sets the generation's start if the detector was made without one (a coordinator that
  // recovered the job).
  void StartIfUnset(absl::Time start);

  // What the coordinator knows of the workers' own liveness: a worker that is not heard
  // from (a hung daemon, a cut link) relays no heartbeats, and its lease, not this
  // detector, decides about it.
  struct Workers {
    std::function<absl::Time(const std::string&)> last_heard;  // its last heartbeat
    absl::Duration heartbeat_interval = absl::Seconds(1);
  };
  // A hang of `job`'s live ranks (RankInfo without an exit) at `now`, if any. Never while a
  // worker of a live rank has been silent for heartbeat_interval + 0.5 s; a silent rank
  // counts only once its worker spoke 0.5 s after the rank's last beat (it would have
  // relayed a newer one).
  std::optional<Stall> Check(const baton::v1::Job& job, absl::Time now,
                             const Workers& workers) const;
  // As above, without knowledge of the workers (tests).
  std::optional<Stall> Check(const baton::v1::Job& job, absl::Time now) const;

  // The reference of `phase` ("startup", "step", ..., or "report"): the longest recent
  // duration any rank of this generation reported, else what earlier generations did;
  // zero when none is known.
  absl::Duration Reference(const std::string& phase) const;
  // The timeout `phase` gets under `policy` (with defaults applied).
  absl::Duration PhaseTimeout(const baton::v1::RestartPolicy& policy,
                              const std::string& phase) const;
  // Median of the recent step times (from metric points); zero before two steps of one rank.
  absl::Duration MedianStepTime() const;

 private:
  struct RankState {
    // Progress (points and beats).
    int64_t step = -1;
    absl::Time advanced = absl::InfinitePast();    // when its step last grew
    absl::Time point_time = absl::InfinitePast();  // the worker's timestamp of its last point
    std::deque<absl::Duration> report_gaps;        // worker time between its points
    // Heartbeats.
    bool beats = false;
    int64_t beat_seq = 0;
    absl::Time beat_at = absl::InfinitePast();
    std::string phase;
    absl::Time phase_since = absl::InfinitePast();
    int64_t collectives = 0;
    bool waiting = false;
    absl::Time waiting_since = absl::InfinitePast();
    std::map<std::string, absl::Duration> references;
    // Output.
    absl::Time output_at = absl::InfinitePast();
  };

  std::optional<Stall> CheckBeats(const baton::v1::RestartPolicy& policy,
                                  const std::vector<const baton::v1::RankInfo*>& live,
                                  absl::Time progress, absl::Time now,
                                  const Workers& workers) const;
  std::optional<Stall> CheckReports(const baton::v1::RestartPolicy& policy,
                                    const std::vector<const baton::v1::RankInfo*>& live,
                                    absl::Time progress, absl::Time now) const;
  std::optional<Stall> CheckOutput(const baton::v1::RestartPolicy& policy,
                                   const std::vector<const baton::v1::RankInfo*>& live,
                                   absl::Time now) const;
  const RankState* Find(int32_t rank) const;

  absl::Time start_;
  std::map<int32_t, RankState> ranks_;
  std::deque<absl::Duration> step_times_;          // recent time-per-step samples, newest last
  std::map<std::string, absl::Duration> earlier_;  // references of earlier generations
};

}  // namespace baton::coordinator
