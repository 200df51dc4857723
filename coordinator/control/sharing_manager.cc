#include "coordinator/control/sharing_manager.h"

#include <algorithm>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/spec/job_spec.h"
#include "common/status_macros.h"
#include "coordinator/control/job_ranks.h"

namespace baton::coordinator {
namespace {

// Usage is kept in milli-slot-seconds and advanced at most once a second, so that the
// decay of a pass run every few milliseconds is not lost to rounding.
constexpr int64_t kUsageScale = 1000;
constexpr absl::Duration kUsageStep = absl::Seconds(1);

bool IsRelease(const baton::v1::Job& job) {
  const auto& failures = job.restarts().failures();
  if (failures.empty()) return false;
  const baton::v1::Failure& f = *failures.rbegin();
  return f.generation() == job.generation() &&
         (f.reason_code() == baton::v1::FAILURE_REASON_PREEMPTED ||
          f.reason_code() == baton::v1::FAILURE_REASON_SHRINKING);
}

}  // namespace

SharingManager::SharingManager(ControlContext* ctx, RecoveryManager* recovery,
                               RecoveryManager::StartRendezvousFn start_rendezvous)
    : ctx_(ctx), recovery_(recovery), start_rendezvous_(std::move(start_rendezvous)) {}

void SharingManager::SetQueues(QueueSet set) {
  set_ = std::move(set);
  enabled_ = true;
  recovery_->HoldGangSizeOnRestart(true);
}

absl::StatusOr<baton::v1::JobQueueing> SharingManager::Resolve(const baton::v1::JobSpec& spec,
                                                               const std::string& owner) const {
  baton::v1::JobQueueing q;
  // Their errors name the field ("queue: ...", "priority: ...").
  ASSIGN_OR_RETURN(const std::string queue, QueueFor(set_, spec.queue(), owner));
  ASSIGN_OR_RETURN(const int priority, PriorityIn(set_, queue, spec.priority()));
  RETURN_IF_ERROR(CanEverStart(spec, queue));
  q.set_queue(queue);
  q.set_priority(priority);
  return q;
}

const QueueConfig* SharingManager::FindQueue(const std::string& name) const {
  for (const QueueConfig& c : set_.queues) {
    if (c.name == name) return &c;
  }
  return nullptr;
}

Quantity SharingManager::CohortNominal(const std::string& cohort) const {
  Quantity total;
  for (const QueueConfig& c : set_.queues) {
    if (c.cohort == cohort) total += c.nominal;
  }
  return total;
}

absl::Status SharingManager::CanEverStart(const baton::v1::JobSpec& spec,
                                          const std::string& queue) const {
  const QueueConfig* config = FindQueue(queue);
  if (config == nullptr) return absl::OkStatus();  // QueueFor found it: not reached
  const bool preemptible = IsPreemptible(spec);
  const int64_t limit = !config->cohort.empty() && preemptible ? CohortNominal(config->cohort).slots
                                                               : config->nominal.slots;
  const int64_t workers = std::max(spec.workers().min(), 1);
  const int64_t need = workers * SlotsPerWorker(spec);
  if (need <= limit) return absl::OkStatus();
  const auto slots = [](int64_t n) { return absl::StrCat(n, n == 1 ? " slot" : " slots"); };
  const bool borrows = !config->cohort.empty() && preemptible;
  return absl::FailedPreconditionError(absl::StrCat(
      "workers.min: the job needs ", slots(need), " (", workers, " worker", workers == 1 ? "" : "s",
      " x ", SlotsPerWorker(spec), "), more than queue ", queue, " can ever hold (",
      borrows
          ? absl::StrCat("its cohort ", config->cohort, "'s quotas: ", slots(limit))
          : absl::StrCat(
                "its quota: ", slots(limit),
                config->cohort.empty() ? "" : "; a job that is not preemptible does not borrow"),
      "): it would never start"));
}

std::string SharingManager::QueueOf(const baton::v1::Job& job) const {
  return job.queueing().queue().empty() ? set_.default_queue : job.queueing().queue();
}

bool SharingManager::AllHaveGpus(const std::vector<std::string>& workers) const {
  return !workers.empty() && std::all_of(workers.begin(), workers.end(), [&](const auto& w) {
    return ctx_->workers()->HasGpus(w);
  });
}

bool SharingManager::IsGpuJob(const baton::v1::Job& job) const {
  return AllHaveGpus(WorkersOf(job));
}

Quantity SharingManager::Held(const baton::v1::Job& job) const {
  const std::vector<std::string> workers = WorkersOf(job);
  const int64_t slots = SlotsPerWorker(job.spec()) * static_cast<int64_t>(workers.size());
  return {slots, AllHaveGpus(workers) ? slots : 0};
}

AdmissionSnapshot SharingManager::Snapshot() {
  AdmissionSnapshot snap;
  snap.queues = set_.queues;
  bool all_gpus = false;
  for (const WorkerCapacity& w : ctx_->FreeCapacity()) {
    AdmissionWorker a;
    a.id = w.worker_id;
    a.free_slots = w.free_slots;
    a.total_slots = ctx_->workers()->Slots(w.worker_id);
    a.gpus = ctx_->workers()->HasGpus(w.worker_id);
    all_gpus = (snap.workers.empty() || all_gpus) && a.gpus;
    snap.workers.push_back(std::move(a));
  }
  JobManager* jobs = ctx_->jobs();
  int64_t seq = 0;
  for (const std::string& id : jobs->JobsIn(
           {JobState::kQueued, JobState::kRendezvous, JobState::kRunning, JobState::kRestarting})) {
    const baton::v1::Job& job = *jobs->Peek(id);
    const baton::v1::JobSpec& spec = job.spec();
    AdmissionJob a;
    a.id = id;
    a.queue = QueueOf(job);
    a.user = job.owner();
    a.priority = job.queueing().priority();
    a.seq = seq++;
    a.slots_per_worker = SlotsPerWorker(spec);
    a.min_workers = spec.workers().min();
    a.max_workers = MaxWorkers(spec);
    a.preemptible = IsPreemptible(spec);
    a.elastic = CheckpointsOnRequest(spec) && a.min_workers < a.max_workers;
    const JobState state = *jobs->State(id);
    if (state == JobState::kQueued) {
      a.phase = AdmissionJob::Phase::kPending;
      a.gpu = all_gpus;
      a.nominated = nominated_.count(id) > 0;
    } else {
      a.workers = WorkersOf(job);
      a.gpu = AllHaveGpus(a.workers);
      a.phase = AdmissionJob::Phase::kRunning;
      if (state == JobState::kRestarting) {
        if (IsRelease(job)) {
          a.phase = AdmissionJob::Phase::kReleasing;
        } else {
          // Recovering from a failure: it holds its workers, and cannot be resized now.
          a.preemptible = false;
          a.elastic = false;
        }
      }
    }
    snap.jobs.push_back(std::move(a));
  }
  DecayUsageTo(ctx_->clock()->Now(), snap.jobs);
  snap.user_usage = usage_;
  return snap;
}

void SharingManager::DecayUsageTo(absl::Time now, const std::vector<AdmissionJob>& jobs) {
  if (usage_time_ == absl::InfinitePast()) usage_time_ = now;
  const absl::Duration elapsed = now - usage_time_;
  if (elapsed < kUsageStep) return;
  usage_time_ = now;
  std::map<std::string, std::map<std::string, Quantity>> running;
  for (const AdmissionJob& j : jobs) {
    if (j.phase == AdmissionJob::Phase::kPending) continue;
    running[j.queue][j.user] +=
        j.PerWorker() * (static_cast<int64_t>(j.workers.size()) * kUsageScale);
  }
  for (const auto& [queue, users] : running) {
    for (const auto& [user, held] : users) usage_[queue][user];  // so that it is visited
  }
  const absl::Duration half_life = ctx_->options().fair_share_half_life;
  for (auto q = usage_.begin(); q != usage_.end();) {
    auto& users = q->second;
    for (auto u = users.begin(); u != users.end();) {
      Quantity held;
      if (auto r = running.find(q->first); r != running.end()) {
        if (auto h = r->second.find(u->first); h != r->second.end()) held = h->second;
      }
      u->second = DecayUsage(u->second, held, elapsed, half_life);
      u = u->second == Quantity{} ? users.erase(u) : std::next(u);
    }
    q = users.empty() ? usage_.erase(q) : std::next(q);
  }
}

void SharingManager::Schedule() {
  if (!ctx_->halted().ok()) return;
  AdmissionSnapshot snap = Snapshot();
  AdmissionPlan plan = PlanAdmission(snap);

  // Nominations and the room made end with the job's wait.
  const auto waiting = [&](const std::string& id) {
    absl::StatusOr<JobState> state = ctx_->jobs()->State(id);
    return state.ok() && *state == JobState::kQueued;
  };
  for (auto it = nominated_.begin(); it != nominated_.end();) {
    it = waiting(*it) ? std::next(it) : nominated_.erase(it);
  }
  for (auto it = making_room_.begin(); it != making_room_.end();) {
    it = waiting(it->first) ? std::next(it) : making_room_.erase(it);
  }
  for (const Shrink& s : plan.shrink) CarryOut(s);
  for (const Preemption& p : plan.preempt) CarryOut(p);
  for (const Admission& a : plan.admit) CarryOut(a);

  queue_used_.clear();
  for (const AdmissionJob& j : snap.jobs) {
    if (j.phase == AdmissionJob::Phase::kPending) continue;
    queue_used_[j.queue] += j.PerWorker() * static_cast<int64_t>(j.workers.size());
  }
  for (const Admission& a : plan.admit) {
    if (const baton::v1::Job* job = ctx_->jobs()->Peek(a.job_id); job != nullptr) {
      queue_used_[QueueOf(*job)] += Held(*job);
    }
  }
  // Kept as the pass left them: Describe finds and words the reasons it is asked for.
  const bool nothing_waits = plan.pending.empty();
  last_jobs_ = std::move(snap.jobs);
  last_waiting_ = std::move(plan.pending);
  waiting_index_.clear();
  if (!nothing_waits) return;  // nothing grows while a job waits
  std::map<std::string, Quantity> granted, cohort_granted;
  recovery_->MaybeScaleUp([&](const baton::v1::Job& job, int joining) {
    return GrowthAllowed(job, joining, granted, cohort_granted);
  });
}

void SharingManager::CarryOut(const Shrink& s) {
  const baton::v1::Job* job = ctx_->jobs()->Peek(s.job_id);
  if (job == nullptr || s.leaving.empty()) return;
  const size_t from = WorkersOf(*job).size();
  ++shrinks_[QueueOf(*job)];
  nominated_.insert(s.for_job);
  making_room_[s.for_job].push_back(
      absl::StrCat(s.job_id, " (shrinks from ", from, " to ", s.to_workers, " workers)"));
  recovery_->Resize(s.job_id, baton::v1::FAILURE_REASON_SHRINKING,
                    absl::StrCat("gives up worker", s.leaving.size() > 1 ? "s " : " ",
                                 absl::StrJoin(s.leaving, ", "), " to job ", s.for_job,
                                 ": shrinking from ", from, " to ", s.to_workers, " workers"),
                    s.leaving.front(), s.leaving, s.to_workers);
}

void SharingManager::CarryOut(const Preemption& p) {
  const baton::v1::Job* victim = ctx_->jobs()->Peek(p.job_id);
  const baton::v1::Job* for_job = ctx_->jobs()->Peek(p.for_job);
  if (victim == nullptr || for_job == nullptr) return;
  const std::string victim_queue = QueueOf(*victim), for_queue = QueueOf(*for_job);
  ++preemptions_[victim_queue];
  nominated_.insert(p.for_job);
  making_room_[p.for_job].push_back(absl::StrCat(p.job_id, " (preempted: ", p.why, ")"));
  const std::string cause =
      p.why == "reclaim" ? absl::StrCat("queue ", for_queue, " reclaims its quota, lent to queue ",
                                        victim_queue, ", for job ", p.for_job)
                         : absl::StrCat("job ", p.for_job, " of priority ",
                                        for_job->queueing().priority(), " outranks it (priority ",
                                        victim->queueing().priority(), ") in queue ", for_queue);
  recovery_->Resize(p.job_id, baton::v1::FAILURE_REASON_PREEMPTED, cause, "");
}

void SharingManager::CarryOut(const Admission& a) {
  const baton::v1::Job* job = ctx_->jobs()->Peek(a.job_id);
  if (job == nullptr) return;
  nominated_.erase(a.job_id);
  making_room_.erase(a.job_id);
  start_rendezvous_(*job, a.worker_ids, "Scheduled");
}

int SharingManager::GrowthAllowed(const baton::v1::Job& job, int joining,
                                  std::map<std::string, Quantity>& granted,
                                  std::map<std::string, Quantity>& cohort_granted) const {
  const std::string queue = QueueOf(job);
  const QueueConfig* config = FindQueue(queue);
  if (config == nullptr) return 0;
  const auto used = [&](const std::string& name) {
    auto u = queue_used_.find(name);
    return u == queue_used_.end() ? Quantity{} : u->second;
  };
  Quantity room = config->nominal - used(queue) - granted[queue];
  if (!config->cohort.empty()) {
    Quantity cohort_room = CohortNominal(config->cohort) - cohort_granted[config->cohort];
    for (const QueueConfig& q : set_.queues) {
      if (q.cohort == config->cohort) cohort_room -= used(q.name);
    }
    // A job that is not preemptible grows only within its own queue's quota (it never
    // borrows: what it borrowed could not be reclaimed), and within what the cohort has
    // left.
    room = IsPreemptible(job.spec()) ? cohort_room
                                     : Quantity{std::min(room.slots, cohort_room.slots),
                                                std::min(room.gpus, cohort_room.gpus)};
  }
  const int64_t per = SlotsPerWorker(job.spec());
  const bool gpu = IsGpuJob(job);
  int64_t n = std::min<int64_t>(joining, std::max<int64_t>(room.slots, 0) / per);
  if (gpu) n = std::min<int64_t>(n, std::max<int64_t>(room.gpus, 0) / per);
  const Quantity add{per * n, gpu ? per * n : 0};
  granted[queue] += add;
  if (!config->cohort.empty()) cohort_granted[config->cohort] += add;
  return static_cast<int>(n);
}

void SharingManager::Describe(baton::v1::Job* job) const {
  if (!enabled_) return;
  const std::string queue = QueueOf(*job);
  if (queue.empty()) return;
  baton::v1::JobQueueing* q = job->mutable_queueing();
  q->set_queue(queue);
  if (job->state() == baton::v1::JOB_STATE_QUEUED) {
    if (waiting_index_.empty() && !last_waiting_.empty()) {  // once per pass, on demand
      std::unordered_map<std::string, size_t> job_at;
      for (size_t i = 0; i < last_jobs_.size(); ++i) job_at.emplace(last_jobs_[i].id, i);
      for (const Waiting& w : last_waiting_) {
        waiting_index_.emplace(w.job_id, std::make_pair(&w, &last_jobs_[job_at.at(w.job_id)]));
      }
    }
    if (auto it = waiting_index_.find(job->id()); it != waiting_index_.end()) {
      q->set_position(it->second.first->position);
      q->set_pending_reason(DescribePending(*it->second.second, it->second.first->why));
    }
  }
  if (auto m = making_room_.find(job->id()); m != making_room_.end()) {
    for (const std::string& r : m->second) q->add_making_room(r);
  }
  const bool admitted = job->state() == baton::v1::JOB_STATE_RENDEZVOUS ||
                        job->state() == baton::v1::JOB_STATE_RUNNING ||
                        job->state() == baton::v1::JOB_STATE_RESTARTING;
  if (!admitted) return;
  if (const QueueConfig* c = FindQueue(queue); c != nullptr) {
    auto used = queue_used_.find(queue);
    q->set_borrowing(used != queue_used_.end() && !used->second.FitsIn(c->nominal));
  }
}

baton::v1::ListQueuesResponse SharingManager::ListQueues() const {
  baton::v1::ListQueuesResponse resp;
  resp.set_configured(enabled_);
  if (!enabled_) return resp;
  resp.set_default_queue(set_.default_queue);
  std::vector<std::pair<std::string, int>> classes(set_.priority_classes.begin(),
                                                   set_.priority_classes.end());
  std::sort(classes.begin(), classes.end(),
            [](const auto& a, const auto& b) { return a.second > b.second; });
  for (const auto& [name, value] : classes) {
    baton::v1::PriorityClass* c = resp.add_priority_classes();
    c->set_name(name);
    c->set_value(value);
  }
  std::map<std::string, int> pending, admitted;
  std::map<std::string, Quantity> used;  // what each queue's admitted jobs hold now
  JobManager* jobs = ctx_->jobs();
  for (const std::string& id : jobs->JobsIn({JobState::kQueued})) {
    ++pending[QueueOf(*jobs->Peek(id))];
  }
  for (const std::string& id :
       jobs->JobsIn({JobState::kRendezvous, JobState::kRunning, JobState::kRestarting})) {
    const baton::v1::Job& job = *jobs->Peek(id);
    ++admitted[QueueOf(job)];
    used[QueueOf(job)] += Held(job);
  }
  const auto set = [](baton::v1::QueueQuantity* to, const Quantity& q) {
    to->set_slots(q.slots);
    to->set_gpus(q.gpus);
  };
  for (const QueueConfig& c : set_.queues) {
    baton::v1::QueueStatus* s = resp.add_queues();
    s->set_name(c.name);
    s->set_cohort(c.cohort);
    set(s->mutable_nominal(), c.nominal);
    const Quantity u = used[c.name];
    set(s->mutable_used(), u);
    set(s->mutable_borrowed(), {std::max<int64_t>(u.slots - c.nominal.slots, 0),
                                std::max<int64_t>(u.gpus - c.nominal.gpus, 0)});
    s->set_pending_jobs(pending[c.name]);
    s->set_admitted_jobs(admitted[c.name]);
    if (auto p = preemptions_.find(c.name); p != preemptions_.end()) s->set_preemptions(p->second);
    if (auto p = shrinks_.find(c.name); p != shrinks_.end()) s->set_shrinks(p->second);
    if (auto u = set_.users.find(c.name); u != set_.users.end()) {
      for (const std::string& user : u->second) s->add_users(user);
    }
  }
  return resp;
}

}  // namespace baton::coordinator
