#include "coordinator/jobs/job_manager.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/job_spec.h"
#include "common/spec/message_limits.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"
#include "google/protobuf/util/message_differencer.h"

namespace baton::coordinator {
namespace {

constexpr char kNextJobNumberKey[] = "next_job_number";

}  // namespace

JobManager::JobManager(Store* store, const Clock* clock, JobManagerOptions options)
    : store_(store),
      clock_(clock),
      options_(options),
      streams_(store, [this](const std::string& id) { return View(jobs_.at(id)); }) {}

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
    if (!r.job.request_id().empty()) by_request_id_[r.job.request_id()] = id;
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

absl::StatusOr<baton::v1::Job> JobManager::Submit(baton::v1::JobSpec spec,
                                                  const std::string& request_id,
                                                  const std::string& owner,
                                                  const baton::v1::JobQueueing& queueing) {
  RETURN_IF_ERROR(CheckMessageLimits(spec));
  spec = WithDefaults(std::move(spec));
  RETURN_IF_ERROR(ValidateJobSpec(spec));
  if (!request_id.empty()) {
    auto it = by_request_id_.find(request_id);
    if (it != by_request_id_.end()) {
      const Record& existing = jobs_.at(it->second);
      if (!google::protobuf::util::MessageDifferencer::Equals(existing.job.spec(), spec) ||
          existing.job.owner() != owner) {
        return absl::AlreadyExistsError(absl::StrCat(
            "request_id \"", request_id, "\" already created job ", it->second,
            " with a different spec or owner; use a new request_id for a new job"));
      }
      return View(existing);
    }
  }

  if (options_.max_active_jobs_per_owner > 0) {
    // O(jobs) per submit: the table is bounded by retention, and submits are rare.
    int active = 0;
    for (const auto& [id, record] : jobs_) {
      active += record.job.owner() == owner && !IsTerminal(record.state);
    }
    if (active >= options_.max_active_jobs_per_owner) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "user '", owner, "' has ", active, " jobs that have not ended, the most one user may "
          "(--max_jobs_per_user=", options_.max_active_jobs_per_owner,
          "); wait for one to finish or cancel one"));
    }
  }
  const int64_t number = next_job_number_;
  baton::v1::Job job;
  job.set_id(absl::StrFormat("j-%06d", number));
  *job.mutable_spec() = std::move(spec);
  job.set_state(JobStateToProto(JobState::kQueued));
  *job.mutable_create_time() = ToProto(clock_->Now());
  job.set_message("waiting for workers");
  job.set_request_id(request_id);
  job.set_owner(owner);
  if (!queueing.queue().empty()) *job.mutable_queueing() = queueing;
  baton::v1::JobEvent event;
  event.set_to_state(JobStateToProto(JobState::kQueued));
  event.set_reason("Submitted");
  event.set_message(absl::StrCat(
      "job '", job.spec().name(), "' queued",
      queueing.queue().empty()
          ? std::string()
          : absl::StrCat(" in ", queueing.queue(), " at priority ", queueing.priority())));
  std::vector<baton::v1::JobUpdate> updates = {EventUpdate(1, std::move(event), job)};

  WriteBatch batch;
  batch.jobs.push_back(job);
  batch.updates[job.id()] = updates;
  batch.meta[kNextJobNumberKey] = absl::StrCat(number + 1);
  RETURN_IF_ERROR(Write(batch));
  next_job_number_ = number + 1;
  if (!request_id.empty()) by_request_id_[request_id] = job.id();
  Record& r = jobs_.emplace(job.id(), NewRecord()).first->second;
  r.job = std::move(job);
  r.last_seq = 1;
  return View(r);
}

absl::StatusOr<baton::v1::Job> JobManager::GetWithoutEvents(const std::string& job_id) const {
  ASSIGN_OR_RETURN(const Record* r, Find(job_id));
  return View(*r);
}

absl::StatusOr<baton::v1::Job> JobManager::Get(const std::string& job_id) const {
  ASSIGN_OR_RETURN(baton::v1::Job job, GetWithoutEvents(job_id));
  ASSIGN_OR_RETURN(std::vector<baton::v1::JobUpdate> events,
                   store_->ReadUpdates(job_id, 0, 0, /*events_only=*/true));
  for (baton::v1::JobUpdate& u : events) *job.add_events() = std::move(*u.mutable_event());
  return job;
}

std::vector<baton::v1::Job> JobManager::List(const std::vector<baton::v1::JobState>& states,
                                             int limit, const std::string& before_id) const {
  std::vector<baton::v1::Job> out;
  auto start = before_id.empty() ? jobs_.rbegin()
                                 : std::make_reverse_iterator(jobs_.lower_bound(before_id));
  for (auto it = start; it != jobs_.rend(); ++it) {
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
  return it == jobs_.end() ? nullptr : &Current(it->second);
}

const baton::v1::Job* JobManager::PeekWritten(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? nullptr : &it->second.job;
}

absl::Status JobManager::Update(const baton::v1::Job& job,
                                std::vector<baton::v1::JobEvent> events) {
  ASSIGN_OR_RETURN(Record * r, Find(job.id()));
  if (job.state() != r->job.state()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job.id(), ": Update may not change the state (",
                     JobStateName(r->state), " -> ", baton::v1::JobState_Name(job.state()),
                     "); use Transition"));
  }
  WriteBatch batch;
  batch.jobs.push_back(job);
  std::vector<baton::v1::JobUpdate> updates;
  TakeStaged(*r, &updates);
  for (baton::v1::JobEvent& e : events) {
    updates.push_back(EventUpdate(r->last_seq + 1 + static_cast<int64_t>(updates.size()),
                                  std::move(e), job));
  }
  if (!updates.empty()) batch.updates[job.id()] = updates;
  return Commit(*r, std::move(batch), job, std::move(updates));
}

absl::Status JobManager::Transition(const std::string& job_id, JobState to,
                                    const std::string& reason, const std::string& message,
                                    const baton::v1::Job* record) {
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  RETURN_IF_ERROR(CheckTransition(r->state, to));
  if (record != nullptr && (record->id() != job_id || record->state() != r->job.state())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job ", job_id, ": the record given to Transition is of job ", record->id(),
        " in state ", baton::v1::JobState_Name(record->state())));
  }
  baton::v1::Job job = record != nullptr ? *record : Current(*r);
  std::vector<baton::v1::JobUpdate> updates;
  TakeStaged(*r, &updates);
  const absl::Time now = clock_->Now();
  job.set_state(JobStateToProto(to));
  job.set_message(message);
  if (to == JobState::kRendezvous && !job.has_start_time()) {
    *job.mutable_start_time() = ToProto(now);
  }
  if (IsTerminal(to)) {
    *job.mutable_end_time() = ToProto(now);
    *job.mutable_result()->mutable_wall_time() =
        ToProto(job.has_start_time() ? now - FromProto(job.start_time()) : absl::ZeroDuration());
    job.mutable_result()->set_goodput(Goodput(r->productive, job, now));
  }
  baton::v1::JobEvent event;
  event.set_from_state(JobStateToProto(r->state));
  event.set_to_state(JobStateToProto(to));
  event.set_reason(reason);
  event.set_message(message);
  updates.push_back(
      EventUpdate(r->last_seq + 1 + static_cast<int64_t>(updates.size()), std::move(event), job));
  WriteBatch batch;
  batch.jobs.push_back(job);
  batch.updates[job_id] = updates;
  RETURN_IF_ERROR(Commit(*r, std::move(batch), std::move(job), std::move(updates)));
  if (IsTerminal(to)) streams_.End(job_id);
  return absl::OkStatus();
}

absl::Status JobManager::RecordEvent(const std::string& job_id, const std::string& reason,
                                     const std::string& message) {
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  if (staged_.count(job_id) > 0) RETURN_IF_ERROR(Flush());
  baton::v1::JobEvent event;
  event.set_reason(reason);
  event.set_message(message);
  std::vector<baton::v1::JobUpdate> updates = {
      EventUpdate(r->last_seq + 1, std::move(event), r->job)};
  WriteBatch batch;
  batch.updates[job_id] = updates;
  return Commit(*r, std::move(batch), r->job, std::move(updates));
}

absl::Status JobManager::Stage(const std::string& job_id,
                               absl::FunctionRef<void(baton::v1::Job&)> mutate,
                               std::vector<baton::v1::JobEvent> events) {
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  const bool was_staged = r->staged.has_value();
  baton::v1::Job& job = was_staged ? *r->staged : r->staged.emplace(r->job);
  mutate(job);
  if (job.id() != job_id || job.state() != r->job.state()) {
    // Staged changes are facts about ranks; ids and states change through Transition.
    absl::Status refused = absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, ": Stage may not change the id or the state (it made them ",
                     job.id(), ", ", baton::v1::JobState_Name(job.state()), ")"));
    job.set_id(job_id);
    job.set_state(r->job.state());
    if (!was_staged) r->staged.reset();
    return refused;
  }
  for (baton::v1::JobEvent& e : events) {
    r->staged_updates.push_back(EventUpdate(0, std::move(e), job));
  }
  staged_.insert(job_id);
  return absl::OkStatus();
}

absl::Status JobManager::Flush() {
  if (staged_.empty()) return absl::OkStatus();
  WriteBatch batch;
  for (const std::string& id : staged_) {
    Record& r = jobs_.at(id);
    if (r.staged.has_value()) batch.jobs.push_back(*r.staged);
    if (r.staged_updates.empty()) continue;
    std::vector<baton::v1::JobUpdate>& updates = batch.updates[id];
    updates = r.staged_updates;
    for (size_t i = 0; i < updates.size(); ++i) {
      updates[i].set_seq(r.last_seq + 1 + static_cast<int64_t>(i));
    }
  }
  RETURN_IF_ERROR(Write(batch));
  for (const std::string& id : staged_) {
    Record& r = jobs_.at(id);
    if (r.staged.has_value()) r.job = *std::move(r.staged);
    r.staged.reset();
    r.staged_updates.clear();
    auto it = batch.updates.find(id);
    if (it == batch.updates.end()) continue;
    r.last_seq = it->second.back().seq();
    streams_.Publish(id, it->second);
  }
  staged_.clear();
  return absl::OkStatus();
}

void JobManager::TakeStaged(Record& r, std::vector<baton::v1::JobUpdate>* updates) {
  for (baton::v1::JobUpdate& u : r.staged_updates) {
    u.set_seq(r.last_seq + 1 + static_cast<int64_t>(updates->size()));
    updates->push_back(std::move(u));
  }
  r.staged.reset();
  r.staged_updates.clear();
  staged_.erase(r.job.id());
}

absl::Status JobManager::AddMetrics(const std::string& job_id,
                                    const std::vector<baton::v1::MetricPoint>& points) {
  if (points.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  // Points change only the result (rank 0's); the record is copied (its size grows with
  // its ranks) only when that changed and it is not staged already, so a report of another
  // rank costs O(its points).
  const baton::v1::Job& current = Current(*r);
  baton::v1::JobResult result = current.result();
  std::vector<StragglerDetector::Straggler> found;
  for (const baton::v1::MetricPoint& p : points) {
    baton::v1::JobUpdate u;
    *u.mutable_metric() = p;
    r->staged_updates.push_back(std::move(u));
    r->productive.Add(p);
    if (auto s = r->stragglers.Add(p)) found.push_back(*s);
    if (p.rank() != 0) continue;
    if (p.step() < result.steps()) continue;  // out of order; keep the newest
    result.set_steps(p.step());
    for (const auto& [k, v] : p.values()) (*result.mutable_final_metrics())[k] = v;
    auto loss = p.values().find("loss");
    if (result.initial_loss() == 0 && loss != p.values().end()) {
      result.set_initial_loss(loss->second);
    }
  }
  for (const StragglerDetector::Straggler& s : found) {
    baton::v1::JobEvent event;
    event.set_reason("Straggler");
    event.set_message(absl::StrFormat(
        "rank %d is a straggler: its recent step time is %.2fx the median of the job's ranks "
        "(above %.2fx for %d consecutive metric points, generation %d)",
        s.rank, s.ratio, options_.straggler_threshold, options_.slowdown_window,
        s.generation));
    r->staged_updates.push_back(EventUpdate(0, std::move(event), current));
  }
  if (!google::protobuf::util::MessageDifferencer::Equals(result, current.result())) {
    baton::v1::Job& staged = r->staged.has_value() ? *r->staged : r->staged.emplace(r->job);
    *staged.mutable_result() = std::move(result);
  }
  staged_.insert(job_id);
  return absl::OkStatus();
}

absl::Status JobManager::AddLogs(const std::string& job_id,
                                 std::vector<baton::v1::LogLine> lines) {
  if (lines.empty()) return absl::OkStatus();
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  int64_t seq = r->last_log_seq;
  for (baton::v1::LogLine& line : lines) {
    line.set_seq(++seq);
    // Workers cut long lines; one that did not (an older or broken worker) is cut here.
    if (static_cast<int64_t>(line.text().size()) > kMaxLogLineBytes) {
      line.mutable_text()->resize(kMaxLogLineBytes);
      line.mutable_text()->append(" [line truncated]");
    }
  }
  WriteBatch batch;
  batch.logs[job_id] = lines;
  RETURN_IF_ERROR(Write(batch));
  r->last_log_seq = seq;
  streams_.PublishLogs(job_id, lines);
  return absl::OkStatus();
}

absl::Status JobManager::Watch(const std::string& job_id, int64_t after_seq,
                              std::shared_ptr<UpdateSink> sink, bool events_only) {
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  return streams_.Watch(job_id, after_seq, IsTerminal(r->state), std::move(sink), events_only);
}

std::optional<double> JobManager::GoodputRatioNow(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return std::nullopt;
  const baton::v1::Job& job = it->second.job;
  return GoodputRatio(it->second.productive,
                      job.has_start_time() ? FromProto(job.start_time()) : absl::InfinitePast(),
                      job.has_end_time() ? FromProto(job.end_time()) : absl::InfiniteFuture(),
                      clock_->Now());
}

std::map<int32_t, double> JobManager::SlowdownRatios(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? std::map<int32_t, double>() : it->second.stragglers.Ratios();
}

std::map<int32_t, double> JobManager::Stragglers(const std::string& job_id) const {
  auto it = jobs_.find(job_id);
  return it == jobs_.end() ? std::map<int32_t, double>() : it->second.stragglers.Persistent();
}

absl::Status JobManager::FollowLogs(const std::string& job_id, const LogQuery& query,
                                    std::shared_ptr<LogSink> sink) {
  ASSIGN_OR_RETURN(Record * r, Find(job_id));
  return streams_.Follow(job_id, query, IsTerminal(r->state), std::move(sink));
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

absl::StatusOr<std::string> JobManager::ReadMeta(const std::string& key) const {
  return store_->GetMeta(key);
}

absl::Status JobManager::WriteMeta(const std::string& key, const std::string& value) {
  WriteBatch batch;
  batch.meta[key] = value;
  return Write(batch);
}

absl::Status JobManager::Prune(int max_jobs) {
  const RetentionOptions& opt = options_.retention;
  const absl::Time now = clock_->Now();
  RetentionLimits limits;
  limits.min_time = now - opt.history_max_age;
  limits.max_points = opt.max_points_per_job;
  limits.max_log_bytes = opt.max_log_bytes_per_job;
  // Round robin from the job after the cursor, wrapping once.
  std::vector<std::string> due;
  auto start = jobs_.upper_bound(prune_cursor_);
  for (size_t i = 0; i < jobs_.size() && static_cast<int>(due.size()) < max_jobs; ++i) {
    if (start == jobs_.end()) start = jobs_.begin();
    if (now >= start->second.next_prune) due.push_back(start->first);
    ++start;
  }
  for (const std::string& id : due) {
    prune_cursor_ = id;
    Record& r = jobs_.at(id);
    r.next_prune = now + opt.prune_interval;
    if (IsTerminal(r.state) && r.job.has_end_time() &&
        now >= FromProto(r.job.end_time()) + opt.job_retention) {
      WriteBatch batch;
      batch.delete_jobs.push_back(id);
      RETURN_IF_ERROR(Write(batch));
      streams_.End(id);
      by_request_id_.erase(r.job.request_id());
      staged_.erase(id);  // a late report staged for it goes with it
      jobs_.erase(id);
      continue;
    }
    if (!store_error_.ok()) return store_error_;
    const absl::Time start = clock_->Now();
    absl::StatusOr<int64_t> pruned = store_->Prune(id, limits);
    commit_stats_.time += clock_->Now() - start;
    ++(pruned.ok() ? commit_stats_.commits : commit_stats_.failed);
    if (!pruned.ok()) {
      store_error_ = pruned.status();
      return store_error_;
    }
  }
  return absl::OkStatus();
}

baton::v1::JobUpdate JobManager::EventUpdate(int64_t seq, baton::v1::JobEvent event,
                                             const baton::v1::Job& job) const {
  *event.mutable_time() = ToProto(clock_->Now());
  event.set_generation(job.generation());
  baton::v1::JobUpdate u;
  u.set_seq(seq);
  *u.mutable_event() = std::move(event);
  return u;
}

absl::Status JobManager::Write(const WriteBatch& batch) {
  if (!store_error_.ok()) {
    return absl::UnavailableError(absl::StrCat(
        "the coordinator's state store failed earlier and nothing more is written until it "
        "restarts: ",
        store_error_.message()));
  }
  const absl::Time start = clock_->Now();
  absl::Status s = store_->Write(batch);
  commit_stats_.time += clock_->Now() - start;
  ++(s.ok() ? commit_stats_.commits : commit_stats_.failed);
  if (!s.ok()) store_error_ = s;
  return s;
}

absl::Status JobManager::Commit(Record& r, WriteBatch batch, std::optional<baton::v1::Job> job,
                                std::vector<baton::v1::JobUpdate> updates) {
  RETURN_IF_ERROR(Write(batch));
  if (job.has_value()) {
    JobState state = r.state;
    RETURN_IF_ERROR(JobStateFromProto(job->state(), &state));
    r.job = *std::move(job);
    r.state = state;
  }
  if (!updates.empty()) r.last_seq = updates.back().seq();
  streams_.Publish(r.job.id(), updates);
  return absl::OkStatus();
}

baton::v1::Job JobManager::View(const Record& r) const {
  baton::v1::Job job = r.job;
  if (job.has_start_time() && !IsTerminal(r.state)) {
    const absl::Time now = clock_->Now();
    *job.mutable_result()->mutable_wall_time() = ToProto(now - FromProto(job.start_time()));
    job.mutable_result()->set_goodput(Goodput(r.productive, job, now));
  }
  return job;
}

double JobManager::Goodput(const ProductiveTime& productive, const baton::v1::Job& job,
                           absl::Time now) {
  return GoodputRatio(productive,
                      job.has_start_time() ? FromProto(job.start_time()) : absl::InfinitePast(),
                      job.has_end_time() ? FromProto(job.end_time()) : absl::InfiniteFuture(),
                      now)
      .value_or(0);
}

}  // namespace baton::coordinator
