#include "coordinator/policy/admission.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace baton::coordinator {
namespace {

using Phase = AdmissionJob::Phase;

double Fraction(int64_t used, int64_t nominal) {
  if (nominal > 0) return static_cast<double>(used) / static_cast<double>(nominal);
  return used > 0 ? std::numeric_limits<double>::infinity() : 0;
}

// The larger of the slot and GPU fractions.
double DominantShare(const Quantity& used, const Quantity& nominal) {
  return std::max(Fraction(used.slots, nominal.slots), Fraction(used.gpus, nominal.gpus));
}

std::string Amount(const Quantity& q) {
  const std::string slots = absl::StrCat(q.slots, q.slots == 1 ? " slot" : " slots");
  return q.gpus > 0 ? absl::StrCat(slots, ", ", q.gpus, q.gpus == 1 ? " GPU" : " GPUs") : slots;
}

// "3/4 slots" or "3/4 slots, 1/2 GPUs": `used` of `nominal`.
std::string UsedOf(const Quantity& used, const Quantity& nominal) {
  const std::string slots = absl::StrCat(used.slots, "/", nominal.slots, " slots");
  return used.gpus > 0 || nominal.gpus > 0
             ? absl::StrCat(slots, ", ", used.gpus, "/", nominal.gpus, " GPUs")
             : slots;
}

// Free room per worker, with a count of workers per free level (per kind: GPU or not) so
// that "how many workers have s free" costs O(levels), and reservations held apart.
class Capacity {
 public:
  explicit Capacity(std::vector<AdmissionWorker> workers) : workers_(std::move(workers)) {
    std::sort(workers_.begin(), workers_.end(),
              [](const AdmissionWorker& a, const AdmissionWorker& b) { return a.id < b.id; });
    int top = 0;
    for (const AdmissionWorker& w : workers_) top = std::max(top, std::max(w.free_slots, 0));
    for (int k = 0; k < 2; ++k) {
      free_count_[k].assign(top + 1, 0);
      unheld_count_[k].assign(top + 1, 0);
    }
    held_.assign(workers_.size(), 0);
    auto index = std::make_shared<std::unordered_map<std::string, size_t>>();
    index->reserve(workers_.size());
    for (size_t i = 0; i < workers_.size(); ++i) {
      AdmissionWorker& w = workers_[i];
      w.free_slots = std::max(w.free_slots, 0);
      (*index)[w.id] = i;
      ++free_count_[w.gpus][w.free_slots];
      ++unheld_count_[w.gpus][w.free_slots];
    }
    index_ = std::move(index);
  }

  // Workers that could host one member of `job` now (reservations respected, or not).
  int Fitting(const AdmissionJob& job, bool ignore_holds = false) const {
    const std::vector<int>* counts = ignore_holds ? unheld_count_ : free_count_;
    int n = 0;
    for (int kind = job.gpu ? 1 : 0; kind < 2; ++kind) {
      for (size_t level = job.slots_per_worker; level < counts[kind].size(); ++level) {
        n += counts[kind][level];
      }
    }
    return n;
  }

  // Takes `n` workers with room for a member of `job`, lowest ids first.
  std::vector<std::string> Take(const AdmissionJob& job, int n) {
    std::vector<std::string> out;
    for (size_t i = 0; i < workers_.size() && static_cast<int>(out.size()) < n; ++i) {
      AdmissionWorker& w = workers_[i];
      if ((job.gpu && !w.gpus) || w.free_slots < job.slots_per_worker) continue;
      SetFree(i, w.free_slots - job.slots_per_worker, held_[i]);
      out.push_back(w.id);
    }
    return out;
  }

  // Holds for `job` the workers closest to taking one of its members (the most free
  // slots first, then the lowest id), min_workers of them among those that could ever
  // host one (with `all`, every one of those: room is being made for it, counting on what
  // is free now): on each, what one member needs of what is free there now.
  void Hold(const AdmissionJob& job, bool all = false) {
    std::vector<size_t> capable;
    for (size_t i = 0; i < workers_.size(); ++i) {
      const AdmissionWorker& w = workers_[i];
      if ((!job.gpu || w.gpus) && w.total_slots >= job.slots_per_worker) capable.push_back(i);
    }
    const size_t n =
        all ? capable.size()
            : std::min(capable.size(), static_cast<size_t>(std::max(job.min_workers, 0)));
    std::partial_sort(capable.begin(), capable.begin() + n, capable.end(), [&](size_t a, size_t b) {
      return workers_[a].free_slots != workers_[b].free_slots
                 ? workers_[a].free_slots > workers_[b].free_slots
                 : a < b;
    });
    for (size_t k = 0; k < n; ++k) {
      const size_t i = capable[k];
      const int hold = std::min(workers_[i].free_slots, job.slots_per_worker);
      SetFree(i, workers_[i].free_slots - hold, held_[i] + hold);
    }
  }

  // Gives `slots` back on `worker` (a release being simulated); unknown workers ignored.
  void Release(const std::string& worker, int slots) {
    auto it = index_->find(worker);
    if (it == index_->end()) return;
    SetFree(it->second, workers_[it->second].free_slots + slots, held_[it->second]);
  }

 private:
  void SetFree(size_t i, int free, int held) {
    AdmissionWorker& w = workers_[i];
    Count(free_count_[w.gpus], w.free_slots, -1);
    Count(unheld_count_[w.gpus], w.free_slots + held_[i], -1);
    w.free_slots = free;
    held_[i] = held;
    Count(free_count_[w.gpus], w.free_slots, +1);
    Count(unheld_count_[w.gpus], w.free_slots + held_[i], +1);
  }
  static void Count(std::vector<int>& counts, int level, int delta) {
    if (level >= static_cast<int>(counts.size())) counts.resize(level + 1, 0);
    counts[level] += delta;
  }

  std::vector<AdmissionWorker> workers_;  // by id
  std::vector<int> held_;
  // Worker id -> position; never changes, shared by copies (trial passes).
  std::shared_ptr<const std::unordered_map<std::string, size_t>> index_;
  std::vector<int> free_count_[2];    // [gpus][free slots] -> workers
  std::vector<int> unheld_count_[2];  // the same with the holds given back
};

struct QueueState {
  const QueueConfig* config = nullptr;
  Quantity used;
  const std::map<std::string, Quantity>* users = nullptr;  // decayed usage; may be null
};

struct CohortState {
  Quantity nominal;
  Quantity used;
};

class Pass {
 public:
  explicit Pass(const AdmissionSnapshot& s) : snapshot_(s), capacity_(s.workers) {
    for (const QueueConfig& q : s.queues) {
      queues_[q.name].config = &q;
      auto users = s.user_usage.find(q.name);
      if (users != s.user_usage.end()) queues_[q.name].users = &users->second;
      if (!q.cohort.empty()) cohorts_[q.cohort].nominal += q.nominal;
    }
    for (const AdmissionJob& j : s.jobs) {
      if (j.phase == Phase::kPending) {
        pending_.push_back(&j);
        continue;
      }
      releasing_ |= j.phase == Phase::kReleasing;
      auto q = queues_.find(j.queue);
      if (q == queues_.end()) continue;
      Use(q->second, j.PerWorker() * static_cast<int64_t>(j.workers.size()));
      running_.push_back(&j);
    }
  }

  AdmissionPlan Run() {
    Order();
    std::unordered_map<std::string, int> next_position;
    plan_.pending.reserve(pending_.size());
    int preemption_tries = 0;
    for (const AdmissionJob* job : pending_) {
      auto q = queues_.find(job->queue);
      PendingReason why;
      why.need = job->PerWorker() * job->min_workers;
      if (q == queues_.end()) {
        why.kind = PendingReason::Kind::kUnknownQueue;
        Wait(*job, why, next_position);
        continue;
      }
      QueueState& queue = q->second;
      FillQuota(queue, why);
      int by_quota = WorkersWithinQuota(*job, queue);
      const bool within_own = (queue.used + why.need).FitsIn(queue.config->nominal);
      const std::string& cohort = queue.config->cohort;
      if (!job->preemptible && !cohort.empty()) {
        // Its lenders could never take back what it borrowed: it stays within its own.
        why.cannot_borrow = true;
        by_quota = std::min(by_quota, WorkersWithinOwnQuota(*job, queue));
      }
      if (!within_own && !cohort.empty() && lender_waiting_.count(cohort) > 0) {
        // A queue of the cohort waits for room within its own quota: nobody borrows
        // meanwhile (else what it is owed would be lent out again as soon as it is freed).
        why.lender_waiting = *lender_waiting_.find(cohort)->second;
        by_quota = std::min(by_quota, WorkersWithinOwnQuota(*job, queue));
      }
      if (by_quota < job->min_workers) {
        why.kind = PendingReason::Kind::kQuota;
        MaybePreempt(*job, queue, why, preemption_tries);
        // Within its own quota yet blocked: its quota is lent out in the cohort.
        if (within_own && !cohort.empty()) lender_waiting_.emplace(cohort, &job->queue);
        Claim(*job, queue, why);
        Wait(*job, why, next_position);
        continue;
      }
      why.fitting_workers = capacity_.Fitting(*job);
      if (why.fitting_workers >= job->min_workers) {
        const int n = std::min({job->max_workers, why.fitting_workers, by_quota});
        Admission a;
        a.job_id = job->id;
        a.worker_ids = capacity_.Take(*job, n);
        const Quantity taken = job->PerWorker() * n;
        a.borrowing = !(queue.used + taken).FitsIn(queue.config->nominal);
        Use(queue, taken);
        plan_.admit.push_back(std::move(a));
        continue;
      }
      if (!reserved_for_.empty() &&
          capacity_.Fitting(*job, /*ignore_holds=*/true) >= job->min_workers) {
        why.kind = PendingReason::Kind::kReserved;
        why.reserved_for = reserved_for_;
      } else {
        why.kind = PendingReason::Kind::kCapacity;
      }
      MaybePreempt(*job, queue, why, preemption_tries);
      if (within_own && !cohort.empty()) lender_waiting_.emplace(cohort, &job->queue);
      if (!Claim(*job, queue, why) && reserved_for_.empty()) {
        reserved_for_ = job->id;
        capacity_.Hold(*job);
      }
      Wait(*job, why, next_position);
    }
    return std::move(plan_);
  }

 private:
  // A job room is being made for (planned now, or nominated: a release under way) claims
  // what it needs for the rest of the pass: its quota and every worker that could host a
  // member, so that no job after it takes what is freed for it. True if it claimed.
  bool Claim(const AdmissionJob& job, QueueState& queue, const PendingReason& why) {
    if (why.kind != PendingReason::Kind::kPreempting && !job.nominated) return false;
    Use(queue, why.need);
    capacity_.Hold(job, /*all=*/true);
    return true;
  }

  void Use(QueueState& q, const Quantity& amount) {
    q.used += amount;
    if (!q.config->cohort.empty()) cohorts_[q.config->cohort].used += amount;
  }

  // The pass order: priority, the queue's dominant share, the user's, submission.
  void Order() {
    struct Key {
      bool later;  // not nominated
      int priority;
      double queue_share;
      double user_share;
      int64_t seq;
      const AdmissionJob* job;
    };
    std::vector<Key> keys;
    keys.reserve(pending_.size());
    for (const AdmissionJob* j : pending_) {
      double queue_share = 0, user_share = 0;
      auto q = queues_.find(j->queue);
      if (q != queues_.end()) {
        queue_share = DominantShare(q->second.used, q->second.config->nominal);
        if (q->second.users != nullptr) {
          auto u = q->second.users->find(j->user);
          if (u != q->second.users->end()) {
            user_share = DominantShare(u->second, q->second.config->nominal);
          }
        }
      }
      keys.push_back({!j->nominated, j->priority, queue_share, user_share, j->seq, j});
    }
    std::sort(keys.begin(), keys.end(), [](const Key& a, const Key& b) {
      return std::tie(a.later, b.priority, a.queue_share, a.user_share, a.seq, a.job->id) <
             std::tie(b.later, a.priority, b.queue_share, b.user_share, b.seq, b.job->id);
    });
    for (size_t i = 0; i < keys.size(); ++i) pending_[i] = keys[i].job;
  }

  void FillQuota(const QueueState& q, PendingReason& why) const {
    why.queue_used = q.used;
    why.queue_nominal = q.config->nominal;
    why.cohort = q.config->cohort;
    if (!why.cohort.empty()) {
      const CohortState& c = cohorts_.at(why.cohort);
      why.cohort_spare = Positive(c.nominal - c.used);
    }
  }

  static Quantity Positive(Quantity q) {
    return {std::max<int64_t>(q.slots, 0), std::max<int64_t>(q.gpus, 0)};
  }

  // Most workers of `job` its queue can take now: within its nominal quota or, in a
  // cohort, within the cohort's total (beyond its own quota it borrows; a queue whose own
  // quota is lent out gets it back by reclaiming, not by overdrawing the cohort). May be
  // below min_workers.
  int WorkersWithinQuota(const AdmissionJob& job, const QueueState& q) const {
    if (q.config->cohort.empty()) return WorkersIn(job, q.config->nominal - q.used);
    const CohortState& c = cohorts_.at(q.config->cohort);
    return WorkersIn(job, c.nominal - c.used);
  }

  // Most workers of `job` its queue's own quota can take now.
  int WorkersWithinOwnQuota(const AdmissionJob& job, const QueueState& q) const {
    return WorkersIn(job, q.config->nominal - q.used);
  }

  // Most workers of `job` (up to max_workers) that `room` holds.
  static int WorkersIn(const AdmissionJob& job, const Quantity& room) {
    const Quantity per = job.PerWorker();
    int64_t n = job.max_workers;
    if (per.slots > 0) n = std::min<int64_t>(n, std::max<int64_t>(room.slots, 0) / per.slots);
    if (per.gpus > 0) n = std::min<int64_t>(n, std::max<int64_t>(room.gpus, 0) / per.gpus);
    return static_cast<int>(n);
  }

  void Wait(const AdmissionJob& job, const PendingReason& why,
            std::unordered_map<std::string, int>& next_position) {
    plan_.pending.push_back({job.id, why, ++next_position[job.queue]});
  }

  // Whether `victim` may be shrunk or preempted for `job`, and why.
  const char* Eligible(const AdmissionJob& job, const QueueState& queue,
                       const AdmissionJob& victim) const {
    if (!victim.preemptible || victim.phase != Phase::kRunning) return nullptr;
    if (victim.queue == job.queue) return victim.priority < job.priority ? "priority" : nullptr;
    auto vq = queues_.find(victim.queue);
    if (queue.config->cohort.empty() || vq == queues_.end() ||
        vq->second.config->cohort != queue.config->cohort) {
      return nullptr;
    }
    // Reclaim: the job stays within its own quota, the victim's queue borrows.
    const bool within_own =
        (queue.used + job.PerWorker() * job.min_workers).FitsIn(queue.config->nominal);
    const bool borrows = !vq->second.used.FitsIn(vq->second.config->nominal);
    return within_own && borrows ? "reclaim" : nullptr;
  }

  // Plans the shrinks and preemptions that let `job` start (at most a few jobs per pass
  // try, and only the first that succeeds acts); `why` becomes kPreempting if so.
  void MaybePreempt(const AdmissionJob& job, const QueueState& queue, PendingReason& why,
                    int& tries) {
    if (!plan_.shrink.empty() || !plan_.preempt.empty()) return;  // one job per pass
    if (releasing_) {
      if (tries == 0) why.kind = PendingReason::Kind::kPreempting;
      ++tries;
      return;
    }
    if (tries++ >= kMaxPreemptionTries) return;
    struct Candidate {
      const AdmissionJob* job;
      const char* why;
    };
    std::vector<Candidate> candidates;
    for (const AdmissionJob* r : running_) {
      if (const char* w = Eligible(job, queue, *r)) candidates.push_back({r, w});
    }
    if (candidates.empty()) return;
    // Borrowers (reclaim) before the own queue's lower priorities, then lowest priority,
    // then newest.
    std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
      const bool ar = std::string(a.why) == "reclaim", br = std::string(b.why) == "reclaim";
      return std::make_tuple(!ar, a.job->priority, -a.job->seq, a.job->id) <
             std::make_tuple(!br, b.job->priority, -b.job->seq, b.job->id);
    });
    Capacity trial = capacity_;
    QueueState own = queue;
    std::map<std::string, CohortState> cohorts = cohorts_;
    const auto fits = [&]() {
      const Quantity need = job.PerWorker() * job.min_workers;
      bool quota;
      if (own.config->cohort.empty()) {
        quota = (own.used + need).FitsIn(own.config->nominal);
      } else {
        const CohortState& c = cohorts.at(own.config->cohort);
        quota = (c.used + need).FitsIn(c.nominal);
      }
      return quota && trial.Fitting(job) >= job.min_workers;
    };
    const auto release = [&](const AdmissionJob& v, const std::vector<std::string>& workers) {
      const Quantity freed = v.PerWorker() * static_cast<int64_t>(workers.size());
      for (const std::string& w : workers) trial.Release(w, v.slots_per_worker);
      if (v.queue == own.config->name) own.used -= freed;
      auto vq = queues_.find(v.queue);
      if (vq != queues_.end() && !vq->second.config->cohort.empty()) {
        cohorts[vq->second.config->cohort].used -= freed;
      }
    };
    std::vector<Shrink> shrinks;
    std::vector<Preemption> preemptions;
    // First shrink elastic jobs above their min, one worker at a time from the end of
    // their gang (rank 0's worker stays).
    for (const Candidate& c : candidates) {
      if (fits()) break;
      const AdmissionJob& v = *c.job;
      if (!v.elastic || static_cast<int>(v.workers.size()) <= v.min_workers) continue;
      Shrink s;
      s.job_id = v.id;
      s.for_job = job.id;
      int keep = static_cast<int>(v.workers.size());
      while (keep > v.min_workers && !fits()) {
        --keep;
        s.leaving.push_back(v.workers[keep]);
        release(v, {v.workers[keep]});
      }
      s.to_workers = keep;
      shrinks.push_back(std::move(s));
    }
    // Then whole jobs (those already shrunk give up the rest).
    for (const Candidate& c : candidates) {
      if (fits()) break;
      const AdmissionJob& v = *c.job;
      std::vector<std::string> rest = v.workers;
      for (auto it = shrinks.begin(); it != shrinks.end(); ++it) {
        if (it->job_id != v.id) continue;
        rest.resize(it->to_workers);
        shrinks.erase(it);
        break;
      }
      release(v, rest);
      preemptions.push_back({v.id, job.id, c.why});
    }
    if (!fits()) return;  // not enough even so: touch nothing
    plan_.shrink = std::move(shrinks);
    plan_.preempt = std::move(preemptions);
    why.kind = PendingReason::Kind::kPreempting;
  }

  static constexpr int kMaxPreemptionTries = 8;

  const AdmissionSnapshot& snapshot_;
  Capacity capacity_;
  std::unordered_map<std::string, QueueState> queues_;
  std::map<std::string, CohortState> cohorts_;
  std::vector<const AdmissionJob*> pending_;
  std::vector<const AdmissionJob*> running_;
  bool releasing_ = false;
  std::string reserved_for_;
  // Per cohort, the first queue with a job that waits for room within its own quota.
  std::map<std::string, const std::string*> lender_waiting_;
  AdmissionPlan plan_;
};

}  // namespace

AdmissionPlan PlanAdmission(const AdmissionSnapshot& snapshot) { return Pass(snapshot).Run(); }

const Waiting* FindWaiting(const AdmissionPlan& plan, const std::string& job_id) {
  for (const Waiting& w : plan.pending) {
    if (w.job_id == job_id) return &w;
  }
  return nullptr;
}

std::string DescribePending(const AdmissionJob& job, const PendingReason& why) {
  const std::string needs =
      absl::StrCat("needs ", Amount(why.need), " (", job.min_workers, " worker",
                   job.min_workers == 1 ? "" : "s", " x ", job.slots_per_worker, ")");
  switch (why.kind) {
    case PendingReason::Kind::kUnknownQueue:
      return absl::StrCat("queue '", job.queue, "' is not configured (see `baton queues`)");
    case PendingReason::Kind::kQuota: {
      std::string out = absl::StrCat(needs, "; queue ", job.queue, " at ",
                                     UsedOf(why.queue_used, why.queue_nominal), " of its quota");
      if (why.cohort.empty()) return absl::StrCat(out, "; it borrows from no cohort");
      if (why.cannot_borrow && !(why.queue_used + why.need).FitsIn(why.queue_nominal)) {
        return absl::StrCat(out, "; it is not preemptible, so it does not borrow from cohort ",
                            why.cohort, " (its lenders could not take the quota back)");
      }
      if ((why.queue_used + why.need).FitsIn(why.queue_nominal)) {
        return absl::StrCat(out, "; the rest of its quota is lent out in cohort ", why.cohort, " (",
                            Amount(why.cohort_spare),
                            " spare): it is reclaimed from preemptible borrowers");
      }
      if (!why.lender_waiting.empty()) {
        return absl::StrCat(out, "; borrowing paused in cohort ", why.cohort, ": queue ",
                            why.lender_waiting, " waits for its own quota");
      }
      return absl::StrCat(out, "; borrowing unavailable in cohort ", why.cohort, " (",
                          Amount(why.cohort_spare), " spare)");
    }
    case PendingReason::Kind::kCapacity:
      return absl::StrCat(needs, "; ", why.fitting_workers, " worker",
                          why.fitting_workers == 1 ? " has" : "s have", " room for ",
                          job.slots_per_worker, job.gpu ? " GPU" : " slot",
                          job.slots_per_worker == 1 ? "" : "s");
    case PendingReason::Kind::kReserved:
      return absl::StrCat(needs, "; the free workers are held for job ", why.reserved_for,
                          ", which waits ahead of it");
    case PendingReason::Kind::kPreempting:
      return absl::StrCat(needs, "; room is being made for it (jobs shrinking or preempted)");
  }
  return needs;
}

Quantity DecayUsage(const Quantity& previous, const Quantity& running, absl::Duration elapsed,
                    absl::Duration half_life) {
  const double factor =
      half_life > absl::ZeroDuration() ? std::exp2(-absl::FDivDuration(elapsed, half_life)) : 0.0;
  const double seconds = absl::ToDoubleSeconds(elapsed);
  return {static_cast<int64_t>(std::llround(previous.slots * factor + running.slots * seconds)),
          static_cast<int64_t>(std::llround(previous.gpus * factor + running.gpus * seconds))};
}

}  // namespace baton::coordinator
