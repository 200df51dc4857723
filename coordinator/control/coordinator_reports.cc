// A worker's reports about its ranks: log lines and metric points, each accepted only for
// ranks of the job's current generation that the worker runs, and the refusal (logged
// once, counted) of reports that are not its own.

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"
#include "coordinator/control/coordinator.h"

namespace baton::coordinator {

namespace {

// The ranks of the job's current generation on `worker_id`, gathered once per report, so
// that checking a report costs O(ranks + entries), not their product.
absl::flat_hash_set<int32_t> RanksOn(const baton::v1::Job& job, const std::string& worker_id) {
  absl::flat_hash_set<int32_t> ranks;
  for (const baton::v1::RankInfo& r : job.ranks()) {
    if (r.worker_id() == worker_id) ranks.insert(r.rank());
  }
  return ranks;
}

// OK if `rank` of `generation` is one of `mine` (RanksOn the reporting worker) in the job's
// current generation; else CheckGeneration's error, or PERMISSION_DENIED: a worker speaks
// for its own ranks only (another's metrics or heartbeats would steer hang detection,
// goodput and the job's result).
absl::Status CheckReportedRank(const baton::v1::Job& job, const absl::flat_hash_set<int32_t>& mine,
                               const std::string& worker_id, int64_t generation, int32_t rank) {
  RETURN_IF_ERROR(CheckGeneration(job, generation));
  if (mine.contains(rank)) return absl::OkStatus();
  return absl::PermissionDeniedError(absl::StrCat("rank ", rank, " of generation ", generation,
                                                  " does not run on worker ", worker_id));
}

}  // namespace

void Coordinator::OnLogs(const std::string& worker_id, const baton::v1::LogsReport& l) {
  const baton::v1::Job* job = jobs_->Peek(l.job_id());
  if (job == nullptr) return;
  // A worker speaks for its own ranks only: another's lines would put words in another
  // user's job. Lines of an older generation (late) are dropped as well.
  const absl::flat_hash_set<int32_t> mine = RanksOn(*job, worker_id);
  std::vector<baton::v1::LogLine> lines;
  lines.reserve(l.lines_size());
  const baton::v1::LogLine* refused = nullptr;
  for (const baton::v1::LogLine& line : l.lines()) {
    if (line.generation() == job->generation() && mine.contains(line.rank())) {
      lines.push_back(line);
    } else if (line.generation() >= job->generation() && refused == nullptr) {
      refused = &line;
    }
  }
  if (refused != nullptr) {
    ctx_.RefuseReport(
        worker_id, "logs",
        absl::StrCat("log lines of job ", l.job_id(), " rank ", refused->rank(), " generation ",
                     refused->generation(), ", which does not run on this worker"));
  }
  if (lines.empty()) return;
  // Output is progress for jobs that opt into output-silence stall detection.
  if (absl::StatusOr<JobState> state = jobs_->State(l.job_id()); state.ok() && IsActive(*state)) {
    StallDetector& stall = ctx_.Runtime(l.job_id()).stall;
    const absl::Time now = clock_->Now();
    for (const baton::v1::LogLine& line : lines) stall.NoteOutput(line.rank(), now);
  }
  ctx_.Ok(jobs_->AddLogs(l.job_id(), std::move(lines)), "add logs");
}

void Coordinator::OnMetrics(const std::string& worker_id, const baton::v1::MetricsReport& m) {
  absl::StatusOr<JobState> state = jobs_->State(m.job_id());
  if (!state.ok()) return;
  const baton::v1::Job& job = *jobs_->Peek(m.job_id());
  const absl::flat_hash_set<int32_t> mine = RanksOn(job, worker_id);
  std::vector<baton::v1::MetricPoint> points;
  absl::Status rejected;
  int rejected_count = 0;
  for (const baton::v1::MetricPoint& p : m.points()) {
    const absl::Status s = CheckReportedRank(job, mine, worker_id, p.generation(), p.rank());
    if (s.ok()) {
      points.push_back(p);
    } else {
      rejected = s;
      ++rejected_count;
    }
  }
  if (rejected_count > 0) {
    if (absl::IsPermissionDenied(rejected)) {
      ctx_.RefuseReport(
          worker_id, "metrics",
          absl::StrCat("metric points of job ", m.job_id(), ": ", rejected.message()));
    } else {
      BATON_LOG(INFO) << "metrics from worker " << worker_id << ": " << rejected_count
                      << " point(s) rejected: " << rejected;
    }
  }
  // Heartbeats feed hang detection only: never stored, never a step of the job's history.
  std::vector<baton::v1::RankBeat> beats;
  for (const baton::v1::RankBeat& b : m.beats()) {
    const absl::Status s = CheckReportedRank(job, mine, worker_id, b.generation(), b.rank());
    if (s.ok()) {
      beats.push_back(b);
    } else if (absl::IsPermissionDenied(s)) {
      ctx_.RefuseReport(worker_id, "metrics",
                        absl::StrCat("heartbeats of job ", m.job_id(), ": ", s.message()));
    }
  }
  if (!beats.empty() && !IsTerminal(*state)) {
    ctx_.Runtime(m.job_id()).stall.NoteBeats(beats, clock_->Now());
  }
  if (!points.empty() && !IsTerminal(*state)) {
    int64_t first = points.front().step();
    absl::Time first_time = absl::InfiniteFuture();
    JobRuntime& rt = ctx_.Runtime(m.job_id());
    for (const baton::v1::MetricPoint& p : points) {
      first = std::min(first, p.step());
      if (p.has_time()) first_time = std::min(first_time, FromProto(p.time()));
      rt.last_step = std::max(rt.last_step.value_or(p.step()), p.step());
    }
    rt.stall.Note(points, clock_->Now());
    if (!recovery_.NoteFirstStep(m.job_id(), first, first_time)) return;
  }
  ctx_.Ok(jobs_->AddMetrics(m.job_id(), points), "add metrics");
}

}  // namespace baton::coordinator
