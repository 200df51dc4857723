#include "coordinator/job_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/job_spec.h"
#include "common/proto_time.h"
#include "common/status_macros.h"

namespace baton::coordinator {
namespace {

constexpr char kNextJobNumberKey[] = "next_job_number";

}  // namespace

JobManager::JobManager(Store* store, const Clock* clock, JobManagerOptions options)
    : store_(store), clock_(clock), options_(options) {}

JobManager::Record JobManager::NewRecord() const {
  Record r;
  r.stragglers = StragglerDetector(options_.slowdown_window, options_.straggler_threshold);
  return r;
}

absl::Status JobManager::Load() {
  ASSIGN_OR_RETURN(std::vector<baton::v1::Job> jobs, store_->LoadJobs());
  for (baton::v1::Job& job : jobs) {
    Record r = NewRecord();
    RETURN_IF_ERROR(JobStateFromProto(job.state(), &r.state));
    ASSIGN_OR_RETURN(r.last_seq, store_->LastUpdateSeq(job.id()));
    ASSIGN_OR_RETURN(r.last_log_seq, store_->LastLogSeq(job.id()));
    if (!IsTerminal(r.state) && job.has_start_time()) {
      ASSIGN_OR_RETURN(std::vector<baton::v1::JobUpdate> updates,
                       store_->ReadUpdates(job.id(), 0, 0, /*events_only=*/false));
      for (const baton::v1::JobUpdate& u : updates) {
        if (!u.has_metric()) continue;
        r.productive.Add(u.metric());
        r.stragglers.Add(u.metric());  // reported before the restart
      }
    }
    r.job = std::move(job);
    const std::string id = r.job.id();
    jobs_.emplace(id, std::move(r));
  }
  absl::StatusOr<std::string> next = store_->GetMeta(kNextJobNumberKey);
  if (next.ok()) {
    next_job_number_ = std::stoll(*next);
  } else if (!absl::IsNotFound(next.status())) {
    return next.status();
  }
  return absl::OkStatus();
}

absl::StatusOr<baton::v1::Job> JobManager::Submit(baton::v1::JobSpec spec) {
  spec = WithDefaults(std::move(spec));
  RETURN_IF_ERROR(ValidateJobSpec(spec));

  const int64_t number = next_job_number_;
  RETURN_IF_ERROR(store_->SetMeta(kNextJobNumberKey, absl::StrCat(number + 1)));
  next_job_number_ = number + 1;

  Record r = NewRecord();
  r.job.set_id(absl::StrFormat("j-%06d", number));
  *r.job.mutable_spec() = std::move(spec);
  r.job.set_state(JobStateToProto(JobState::kQueued));
  *r.job.mutable_create_time() = ToProto(clock_->Now());
  r.job.set_message("waiting for workers");
  RETURN_IF_ERROR(store_->PutJob(r.job));
  const std::string id = r.job.id();
  Record& stored = jobs_.emplace(id, std::move(r)).first->second;

  baton::v1::JobEvent event;
  event.set_to_state(JobStateToProto(JobState::kQueued));
  event.set_reason("Submitted");
  event.set_message(absl::StrCat("job '", stored.job.spec().name(), "' queued"));
  RETURN_IF_ERROR(AppendEvent(stored, std::move(event)));
  return View(stored);
}

absl::StatusOr<baton::v1::Job> JobManager::Get(const std::string& job_id) const {
  ASSIGN_OR_RETURN(const Record* r, Find(job_id));
  baton::v1::Job job = View(*r);
  ASSIGN_OR_RETURN(std::vector<baton::v1::JobUpdate> events,
                   store_->ReadUpdates(job_id, 0, 0, /*events_only=*/true));
  for (baton::v1::JobUpdate& u : events) *job.add_events() = std::move(*u.mutable_event());
  return job;
}

std::vector<baton::v1::Job> JobManager::List(const std::vector<baton::v1::JobState>& states,
                                             int limit) const {
  std::vector<baton::v1::Job> out;
  for (auto it = jobs_.rbegin(); it != jobs_.rend(); ++it) {
    if (limit > 0 && static_cast<int>(out.size()) >= limit) break;
    if (!states.empty() &&
        std::find(states.begin(), states.end(), it->second.job.state()) == states.end()) {
      continue;
    }
    out.push_back(View(it->second));
  }
  return out;
}

absl::StatusOr<JobState> JobManager::State(const std::string& job_id) const {
  ASSIGN_OR_RETURN(const Record* r, Find(job_id));
  return r->state;
}

std::vector<std::string> JobManager::JobsIn(const std::vector<JobState>& states) const {
  std::vector<std::string> ids;
  for (const auto& [id, r] : jobs_) {
    if (std::find(states.begin(), states.end(), r.state) != states.end()) ids.push_back(id);
  }
  return ids;
}

const baton::v1::Job* JobManager::Peek(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second.job;
}

baton::v1::Job* JobManager::Mutable(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second.job;
}

absl::Status JobManager::Save(const std::string& job_id) {
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  return store_->PutJob(r->job);
}

absl::Status JobManager::Transition(const std::string& job_id, JobState to,
                                    const std::string& reason, const std::string& message) {
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  RETURN_IF_ERROR(CheckTransition(r->state, to));
  const absl::Time now = clock_->Now();
  const JobState from = r->state;
  r->state = to;
  r->job.set_state(JobStateToProto(to));
  r->job.set_message(message);
  if (to == JobState::kRendezvous && !r->job.has_start_time()) {
    *r->job.mutable_start_time() = ToProto(now);
  }
  if (IsTerminal(to)) {
    *r->job.mutable_end_time() = ToProto(now);
    *r->job.mutable_result()->mutable_wall_time() =
        ToProto(r->job.has_start_time() ? now - FromProto(r->job.start_time())
                                        : absl::ZeroDuration());
    r->job.mutable_result()->set_goodput(Goodput(*r, now));
  }
  RETURN_IF_ERROR(store_->PutJob(r->job));

  baton::v1::JobEvent event;
  event.set_from_state(JobStateToProto(from));
  event.set_to_state(JobStateToProto(to));
  event.set_reason(reason);
  event.set_message(message);
  RETURN_IF_ERROR(AppendEvent(*r, std::move(event)));
  if (IsTerminal(to)) FinishStreams(*r);
  return absl::OkStatus();
}

absl::Status JobManager::RecordEvent(const std::string& job_id, const std::string& reason,
                                     const std::string& message) {
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  baton::v1::JobEvent event;
  event.set_reason(reason);
  event.set_message(message);
  return AppendEvent(*r, std::move(event));
}

absl::Status JobManager::AddMetrics(const std::string& job_id,
                                    const std::vector<baton::v1::MetricPoint>& points) {
  if (points.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  std::vector<baton::v1::JobUpdate> updates;
  updates.reserve(points.size());
  bool result_changed = false;
  std::vector<StragglerDetector::Straggler> stragglers;
  for (const baton::v1::MetricPoint& p : points) {
    baton::v1::JobUpdate u;
    u.set_seq(r->last_seq + 1 + static_cast<int64_t>(updates.size()));
    *u.mutable_metric() = p;
    updates.push_back(std::move(u));
    r->productive.Add(p);
    if (auto s = r->stragglers.Add(p)) stragglers.push_back(*s);
    if (p.rank() != 0) continue;
    baton::v1::JobResult* result = r->job.mutable_result();
    if (p.step() < result->steps()) continue;  // out of order; keep the newest
    result->set_steps(p.step());
    for (const auto& [k, v] : p.values()) (*result->mutable_final_metrics())[k] = v;
    auto loss = p.values().find("loss");
    if (result->initial_loss() == 0 && loss != p.values().end()) {
      result->set_initial_loss(loss->second);
    }
    result_changed = true;
  }
  RETURN_IF_ERROR(store_->AppendUpdates(job_id, updates));
  r->last_seq += static_cast<int64_t>(updates.size());
  if (result_changed) RETURN_IF_ERROR(store_->PutJob(r->job));
  for (const baton::v1::JobUpdate& u : updates) PushToWatchers(*r, u);
  for (const StragglerDetector::Straggler& s : stragglers) {
    baton::v1::JobEvent event;
    event.set_reason("Straggler");
    event.set_message(absl::StrFormat(
        "rank %d is a straggler: its recent step time is %.2fx the median of the job's ranks "
        "(above %.2fx for %d consecutive metric points, generation %d)",
        s.rank, s.ratio, options_.straggler_threshold, options_.slowdown_window,
        s.generation));
    RETURN_IF_ERROR(AppendEvent(*r, std::move(event)));
  }
  return absl::OkStatus();
}

absl::Status JobManager::AddLogs(const std::string& job_id,
                                 std::vector<baton::v1::LogLine> lines) {
  if (lines.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  int64_t seq = r->last_log_seq;
  for (baton::v1::LogLine& line : lines) line.set_seq(++seq);
  RETURN_IF_ERROR(store_->AppendLogs(job_id, lines));
  r->last_log_seq = seq;
  for (const baton::v1::LogLine& line : lines) {
    auto& followers = r->log_followers;
    followers.erase(std::remove_if(followers.begin(), followers.end(),
                                   [&](const LogFollower& f) {
                                     if (f.rank >= 0 && f.rank != line.rank()) return false;
                                     return !f.sink->Push(line);
                                   }),
                    followers.end());
  }
  return absl::OkStatus();
}

absl::Status JobManager::Watch(const std::string& job_id, int64_t after_seq,
                               std::shared_ptr<UpdateSink> sink) {
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  ASSIGN_OR_RETURN(std::vector<baton::v1::JobUpdate> backlog,
                   store_->ReadUpdates(job_id, after_seq, 0, /*events_only=*/false));
  baton::v1::JobUpdate snapshot;
  *snapshot.mutable_snapshot() = View(*r);
  if (!sink->Push(snapshot)) return absl::OkStatus();
  for (const baton::v1::JobUpdate& u : backlog) {
    if (!sink->Push(u)) return absl::OkStatus();
  }
  if (IsTerminal(r->state)) {
    sink->Finish(absl::OkStatus());
  } else {
    r->watchers.push_back(std::move(sink));
  }
  return absl::OkStatus();
}

absl::Status JobManager::FollowLogs(const std::string& job_id, int32_t rank,
                                    int64_t after_seq, bool follow,
                                    std::shared_ptr<LogSink> sink) {
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  ASSIGN_OR_RETURN(std::vector<baton::v1::LogLine> backlog,
                   store_->ReadLogs(job_id, rank, after_seq, 0));
  for (const baton::v1::LogLine& line : backlog) {
    if (!sink->Push(line)) return absl::OkStatus();
  }
  if (!follow || IsTerminal(r->state)) {
    sink->Finish(absl::OkStatus());
  } else {
    r->log_followers.push_back({rank, std::move(sink)});
  }
  return absl::OkStatus();
}

absl::StatusOr<JobManager::Record*> JobManager::Find(const std::string& job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  return &it->second;
}

absl::StatusOr<const JobManager::Record*> JobManager::Find(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return absl::NotFoundError(absl::StrCat("job ", job_id, " not found"));
  return &it->second;
}

absl::Status JobManager::AppendEvent(Record& r, baton::v1::JobEvent event) {
  *event.mutable_time() = ToProto(clock_->Now());
  event.set_generation(r.job.generation());
  baton::v1::JobUpdate u;
  u.set_seq(r.last_seq + 1);
  const bool state_change = event.to_state() != baton::v1::JOB_STATE_UNSPECIFIED;
  *u.mutable_event() = std::move(event);
  RETURN_IF_ERROR(store_->AppendUpdates(r.job.id(), {u}));
  r.last_seq = u.seq();
  PushToWatchers(r, u);
  if (state_change) {
    baton::v1::JobUpdate snapshot;
    *snapshot.mutable_snapshot() = View(r);
    PushToWatchers(r, snapshot);
  }
  return absl::OkStatus();
}

baton::v1::Job JobManager::View(const Record& r) const {
  baton::v1::Job job = r.job;
  if (job.has_start_time() && !IsTerminal(r.state)) {
    const absl::Time now = clock_->Now();
    *job.mutable_result()->mutable_wall_time() = ToProto(now - FromProto(job.start_time()));
    job.mutable_result()->set_goodput(Goodput(r, now));
  }
  return job;
}

double JobManager::Goodput(const Record& r, absl::Time now) {
  const baton::v1::Job& job = r.job;
  return GoodputRatio(r.productive,
                      job.has_start_time() ? FromProto(job.start_time()) : absl::InfinitePast(),
                      job.has_end_time() ? FromProto(job.end_time()) : absl::InfiniteFuture(),
                      now)
      .value_or(0);
}

void JobManager::PushToWatchers(Record& r, const baton::v1::JobUpdate& update) {
  r.watchers.erase(std::remove_if(r.watchers.begin(), r.watchers.end(),
                                  [&](const std::shared_ptr<UpdateSink>& s) {
                                    return !s->Push(update);
                                  }),
                   r.watchers.end());
}

void JobManager::FinishStreams(Record& r) {
  for (auto& s : r.watchers) s->Finish(absl::OkStatus());
  r.watchers.clear();
  for (auto& f : r.log_followers) f.sink->Finish(absl::OkStatus());
  r.log_followers.clear();
}

}  // namespace baton::coordinator
