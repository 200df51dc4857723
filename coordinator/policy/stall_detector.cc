#include "coordinator/policy/stall_detector.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/job_spec.h"
#include "common/time/proto_time.h"

namespace baton::coordinator {
namespace {

constexpr size_t kStepTimeSamples = 64;
constexpr size_t kReportGapSamples = 32;
// The startup (process start, rendezvous, restore, first step) varies most: a cold start
// where the previous generation's ranks were kept alive, a loaded host.
constexpr absl::Duration kStartupFloor = absl::Seconds(30);
// How much later than expected a worker may be heard from (scheduling, the stream).
constexpr absl::Duration kWorkerSlack = absl::Milliseconds(500);
constexpr char kStartup[] = "startup";
constexpr char kStep[] = "step";
constexpr char kReport[] = "report";

// A duration for messages: milliseconds from 1 s up, microseconds below.
std::string Rounded(absl::Duration d) {
  return absl::FormatDuration(
      absl::Trunc(d, d >= absl::Seconds(1) ? absl::Milliseconds(1) : absl::Microseconds(1)));
}

const google::protobuf::Duration* FixedTimeout(const baton::v1::PhaseTimeouts& t,
                                               const std::string& phase) {
  if (phase == "startup") return &t.startup();
  if (phase == "step") return &t.step();
  if (phase == "eval") return &t.eval();
  if (phase == "checkpoint") return &t.checkpoint();
  if (phase == "epoch") return &t.epoch();
  return nullptr;
}

absl::Duration WindowMax(const std::deque<absl::Duration>& window) {
  absl::Duration longest = absl::ZeroDuration();
  for (const absl::Duration d : window) longest = std::max(longest, d);
  return longest;
}

}  // namespace

StallDetector StallDetector::ForNextGeneration(absl::Time start) const {
  StallDetector next(start);
  next.earlier_ = earlier_;
  for (const char* phase : {"startup", "step", "eval", "checkpoint", "epoch", kReport}) {
    const absl::Duration ref = Reference(phase);
    if (ref > absl::ZeroDuration()) next.earlier_[phase] = ref;
  }
  return next;
}

void StallDetector::Note(const std::vector<baton::v1::MetricPoint>& points, absl::Time now) {
  for (const baton::v1::MetricPoint& p : points) {
    // Step time from the worker's timestamps (one clock per rank); ours if it sent none.
    const absl::Time point_time = p.has_time() ? FromProto(p.time()) : now;
    RankState& rs = ranks_[p.rank()];
    if (p.step() <= rs.step) continue;
    if (rs.step >= 0 && point_time > rs.point_time) {
      step_times_.push_back((point_time - rs.point_time) / (p.step() - rs.step));
      if (step_times_.size() > kStepTimeSamples) step_times_.pop_front();
      rs.report_gaps.push_back(point_time - rs.point_time);
      if (rs.report_gaps.size() > kReportGapSamples) rs.report_gaps.pop_front();
    }
    rs.step = p.step();
    rs.advanced = now;
    rs.point_time = point_time;
  }
}

void StallDetector::NoteBeats(const std::vector<baton::v1::RankBeat>& beats, absl::Time now) {
  for (const baton::v1::RankBeat& b : beats) {
    RankState& rs = ranks_[b.rank()];
    if (rs.beats && b.seq() <= rs.beat_seq) continue;  // reordered or repeated
    const absl::Time at = now - std::max(FromProto(b.age()), absl::ZeroDuration());
    rs.beats = true;
    rs.beat_seq = b.seq();
    rs.beat_at = at;
    rs.phase = b.phase();
    rs.phase_since = at - FromProto(b.in_phase());
    rs.collectives = b.collectives();
    rs.waiting = b.waiting();
    rs.waiting_since = b.waiting() ? at - FromProto(b.waited()) : absl::InfinitePast();
    rs.references.clear();
    for (const auto& [phase, d] : b.references()) rs.references[phase] = FromProto(d);
    if (b.step() > rs.step) {
      if (b.step() > 0) rs.advanced = at;  // step 0: none done yet, no progress
      rs.step = b.step();
    }
  }
}

void StallDetector::NoteOutput(int32_t rank, absl::Time now) {
  RankState& rs = ranks_[rank];
  rs.output_at = std::max(rs.output_at, now);
}

const StallDetector::RankState* StallDetector::Find(int32_t rank) const {
  auto it = ranks_.find(rank);
  return it == ranks_.end() ? nullptr : &it->second;
}

absl::Duration StallDetector::MedianStepTime() const {
  if (step_times_.empty()) return absl::ZeroDuration();
  std::vector<absl::Duration> sorted(step_times_.begin(), step_times_.end());
  std::nth_element(sorted.begin(), sorted.begin() + sorted.size() / 2, sorted.end());
  return sorted[sorted.size() / 2];
}

absl::Duration StallDetector::Reference(const std::string& phase) const {
  absl::Duration ref = absl::ZeroDuration();
  for (const auto& [rank, rs] : ranks_) {
    if (phase == kReport) {
      ref = std::max(ref, WindowMax(rs.report_gaps));
    } else if (auto it = rs.references.find(phase); it != rs.references.end()) {
      ref = std::max(ref, it->second);
    }
  }
  if (ref > absl::ZeroDuration()) return ref;
  auto it = earlier_.find(phase);
  return it == earlier_.end() ? absl::ZeroDuration() : it->second;
}

absl::Duration StallDetector::PhaseTimeout(const baton::v1::RestartPolicy& policy,
                                           const std::string& phase) const {
  if (const google::protobuf::Duration* fixed = FixedTimeout(policy.phase_timeouts(), phase);
      fixed != nullptr && FromProto(*fixed) > absl::ZeroDuration()) {
    return FromProto(*fixed);
  }
  absl::Duration floor = FromProto(policy.stall_floor());
  if (phase == kStartup) floor = std::max(floor, kStartupFloor);
  if (phase == kReport) floor = FromProto(policy.report_stall_floor());
  absl::Duration ref = Reference(phase);
  // The startup ends with the generation's first step: an upper bound for a step.
  if (ref == absl::ZeroDuration() && phase == kStep) ref = Reference(kStartup);
  if (ref == absl::ZeroDuration()) return std::max(floor, FromProto(policy.stall_unlearned()));
  return floor + ref * policy.stall_factor();
}

void StallDetector::StartIfUnset(absl::Time start) {
  if (start_ == absl::InfinitePast()) start_ = start;
}

std::optional<StallDetector::Stall> StallDetector::Check(const baton::v1::Job& job,
                                                         absl::Time now) const {
  return Check(job, now, Workers());
}

std::optional<StallDetector::Stall> StallDetector::Check(const baton::v1::Job& job, absl::Time now,
                                                         const Workers& workers) const {
  const baton::v1::RestartPolicy policy = RestartPolicyWithDefaults(job.spec().restart_policy());
  // Live ranks only: one that exited is not stalled (and its exit is handled elsewhere).
  std::vector<const baton::v1::RankInfo*> live;
  bool any_beats = false;
  absl::Time progress = start_;  // the generation's start counts as progress
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (r.has_exit()) continue;
    live.push_back(&r);
    if (const RankState* rs = Find(r.rank())) {
      any_beats = any_beats || rs->beats;
      progress = std::max(progress, rs->advanced);
    }
  }
  if (live.empty()) return std::nullopt;
  if (workers.last_heard) {
    for (const baton::v1::RankInfo* r : live) {
      if (now - workers.last_heard(r->worker_id()) > workers.heartbeat_interval + kWorkerSlack) {
        return std::nullopt;
      }
    }
  }
  std::optional<Stall> stall = any_beats ? CheckBeats(policy, live, progress, now, workers)
                                         : CheckReports(policy, live, progress, now);
  if (!stall.has_value()) stall = CheckOutput(policy, live, now);
  return stall;
}

std::optional<StallDetector::Stall> StallDetector::CheckBeats(
    const baton::v1::RestartPolicy& policy, const std::vector<const baton::v1::RankInfo*>& live,
    absl::Time progress, absl::Time now, const Workers& workers) const {
  const absl::Duration floor = FromProto(policy.stall_floor());
  const absl::Duration no_progress = now - progress;
  // The others, as the cause names them: who waits in a collective, who does what.
  const auto others = [&](int32_t culprit) {
    std::vector<std::string> waiting;
    int64_t collective = 0;
    for (const baton::v1::RankInfo* r : live) {
      const RankState* rs = Find(r->rank());
      if (r->rank() == culprit || rs == nullptr || !rs->waiting) continue;
      waiting.push_back(absl::StrCat(r->rank()));
      collective = std::max(collective, rs->collectives);
    }
    if (waiting.empty()) return std::string();
    return absl::StrCat("; rank", waiting.size() > 1 ? "s " : " ", absl::StrJoin(waiting, ", "),
                        waiting.size() > 1 ? " wait" : " waits", " for it in collective #",
                        collective);
  };

  // 1. Silent: a process that beat and stopped beating does not run.
  const baton::v1::RankInfo* silent = nullptr;
  const RankState* silent_state = nullptr;
  for (const baton::v1::RankInfo* r : live) {
    const RankState* rs = Find(r->rank());
    if (rs == nullptr || !rs->beats || now - rs->beat_at < floor) continue;
    if (workers.last_heard && workers.last_heard(r->worker_id()) < rs->beat_at + kWorkerSlack) {
      continue;  // its worker may just not have relayed newer beats yet
    }
    if (silent == nullptr || rs->beat_at < silent_state->beat_at) {
      silent = r;
      silent_state = rs;
    }
  }
  if (silent != nullptr && no_progress >= floor) {
    Stall s;
    s.rank = silent->rank();
    s.worker_id = silent->worker_id();
    s.phase = silent_state->phase;
    s.evidence = "silent";
    s.since = silent_state->beat_at;
    s.cause = absl::StrCat("rank ", s.rank, " on worker ", s.worker_id, " sent no heartbeat for ",
                           Rounded(now - silent_state->beat_at), " (stall_floor ", Rounded(floor),
                           "): its process is not running (stopped or frozen); last seen in ",
                           s.phase, " at step ", silent_state->step, others(s.rank),
                           "; no rank made progress for ", Rounded(no_progress));
    return s;
  }

  // 2. Stuck: the rank the others wait for, judged by its own phase's timeout.
  const baton::v1::RankInfo* culprit = nullptr;
  RankState culprit_state;
  for (const baton::v1::RankInfo* r : live) {
    const RankState* found = Find(r->rank());
    RankState rs;
    if (found != nullptr && found->beats) {
      rs = *found;
    } else {  // not beating yet: in its startup since the generation began
      rs.phase = kStartup;
      rs.phase_since = start_;
      if (found != nullptr) rs.step = found->step;
    }
    const auto key = [](const RankState& x) {
      return std::make_tuple(x.collectives, x.waiting, x.phase_since);
    };
    if (culprit == nullptr || key(rs) < key(culprit_state)) {
      culprit = r;
      culprit_state = rs;
    }
  }
  if (culprit == nullptr || culprit_state.phase_since == absl::InfinitePast()) return std::nullopt;
  const absl::Duration timeout = PhaseTimeout(policy, culprit_state.phase);
  const absl::Duration in_phase = now - culprit_state.phase_since;
  if (in_phase < timeout || no_progress < timeout) return std::nullopt;
  Stall s;
  s.rank = culprit->rank();
  s.worker_id = culprit->worker_id();
  s.phase = culprit_state.phase;
  s.evidence = "stuck";
  s.since = culprit_state.phase_since;
  const absl::Duration ref = Reference(s.phase);
  s.cause = absl::StrCat(
      "rank ", s.rank, " on worker ", s.worker_id, " stuck in ", s.phase, " for ",
      Rounded(in_phase), " at step ", std::max<int64_t>(culprit_state.step, 0), " (timeout ",
      Rounded(timeout),
      ref > absl::ZeroDuration()
          ? absl::StrCat(
                " = ", Rounded(s.phase == kStartup ? std::max(floor, kStartupFloor) : floor), " + ",
                policy.stall_factor(), " x ", Rounded(ref), ", its longest recent ", s.phase)
          : std::string(", a phase without history or with a fixed timeout"),
      ")",
      culprit_state.waiting ? absl::StrCat(", itself waiting in collective #",
                                           culprit_state.collectives, " as every live rank is")
                            : std::string(),
      others(s.rank), "; no rank made progress for ", Rounded(no_progress));
  return s;
}

std::optional<StallDetector::Stall> StallDetector::CheckReports(
    const baton::v1::RestartPolicy& policy, const std::vector<const baton::v1::RankInfo*>& live,
    absl::Time progress, absl::Time now) const {
  // Only once the generation reported a step: programs that report none are never stalled
  // by this rule.
  const baton::v1::RankInfo* suspect = nullptr;
  RankState suspect_state;
  bool reported = false;
  for (const baton::v1::RankInfo* r : live) {
    const RankState* found = Find(r->rank());
    RankState rs;
    if (found != nullptr && found->step >= 0) {
      rs = *found;
      reported = true;
    }
    if (suspect == nullptr || rs.step < suspect_state.step ||
        (rs.step == suspect_state.step && rs.advanced < suspect_state.advanced)) {
      suspect = r;
      suspect_state = rs;
    }
  }
  if (!reported) return std::nullopt;
  const absl::Duration timeout = PhaseTimeout(policy, kReport);
  if (now - progress < timeout) return std::nullopt;
  Stall s;
  s.rank = suspect->rank();
  s.worker_id = suspect->worker_id();
  s.phase = kReport;
  s.evidence = "no-report";
  s.since = progress;
  const absl::Duration ref = Reference(kReport);
  s.cause = absl::StrCat("no rank made progress for ", Rounded(now - progress), " (timeout ",
                         Rounded(timeout),
                         ref > absl::ZeroDuration()
                             ? absl::StrCat(" = ", Rounded(FromProto(policy.report_stall_floor())),
                                            " + ", policy.stall_factor(), " x ", Rounded(ref),
                                            ", the longest recent time between reports")
                             : std::string(", before a rank's second report"),
                         "); rank ", s.rank, " on worker ", s.worker_id, " stopped first",
                         suspect_state.step >= 0 ? absl::StrCat(" at step ", suspect_state.step)
                                                 : std::string(" before its first step"));
  return s;
}

std::optional<StallDetector::Stall> StallDetector::CheckOutput(
    const baton::v1::RestartPolicy& policy, const std::vector<const baton::v1::RankInfo*>& live,
    absl::Time now) const {
  const absl::Duration silence = FromProto(policy.output_silence());
  if (silence <= absl::ZeroDuration() || start_ == absl::InfinitePast()) return std::nullopt;
  absl::Time latest = start_;
  const baton::v1::RankInfo* quietest = nullptr;
  absl::Time quietest_at = absl::InfiniteFuture();
  for (const baton::v1::RankInfo* r : live) {
    const RankState* rs = Find(r->rank());
    const absl::Time at = std::max(start_, rs == nullptr ? absl::InfinitePast() : rs->output_at);
    latest = std::max(latest, at);
    if (at < quietest_at) {
      quietest = r;
      quietest_at = at;
    }
  }
  if (now - latest < silence) return std::nullopt;
  Stall s;
  s.rank = quietest->rank();
  s.worker_id = quietest->worker_id();
  s.phase = "output";
  s.evidence = "output-silence";
  s.since = latest;
  s.cause = absl::StrCat("no rank wrote output for ", Rounded(now - latest),
                         " (restart_policy.output_silence ", Rounded(silence), "); rank ", s.rank,
                         " on worker ", s.worker_id, " was silent longest");
  return s;
}

}  // namespace baton::coordinator
