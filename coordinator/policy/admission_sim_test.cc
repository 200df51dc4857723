// A simulation of the admission policy (simulated time, one pass per 10 s tick): 1,000 jobs
// of mixed sizes, priorities and queues arriving at random over 100 workers that fail and
// come back at random. Checks at every tick that no queue goes beyond its quota except by
// borrowing within its cohort, and that no worker is over-committed; at the end that every
// job finished, none waited longer than the bound stated below, and that the same seed
// gives the same outcome. Prints utilisation and waits.
#include <gtest/gtest.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "coordinator/policy/admission.h"

namespace baton::coordinator {
namespace {

using Phase = AdmissionJob::Phase;

constexpr int kWorkers = 100;
constexpr int kSlotsPerWorker = 4;
constexpr int kJobs = 1000;
constexpr int64_t kTick = 10;                  // seconds
constexpr int64_t kArrivalWindow = 24 * 3600;  // jobs arrive over a day
// The bound on any job's wait, from its arrival to its (first) start: the arrival window
// plus twice D, D being the time the whole cluster needs to run every job back to back
// (their slot-seconds over its slots): no job starves while the cluster keeps at least
// half of its slots busy with the backlog. Computed from the generated jobs (WaitBound).

struct SimJob {
  AdmissionJob job;
  int64_t arrival = 0;
  int64_t work = 0;      // worker-seconds of training left
  int64_t started = -1;  // first start
  int64_t finished = -1;
  int64_t releasing_until = -1;
  bool requeue_after_release = false;
};

struct Outcome {
  int64_t wait_bound = 0;
  std::vector<std::pair<std::string, int64_t>> starts;
  double utilisation = 0;
  int64_t max_wait = 0;
  int64_t median_wait = 0;
  int preemptions = 0, shrinks = 0, failures = 0;
  int most_preempted = 0;  // the most times one job was preempted
  int64_t end = 0;
};

Outcome Simulate(uint32_t seed) {
  std::mt19937 rng(seed);
  AdmissionSnapshot base;
  base.queues = {{"team-a", "research", {120, 0}},
                 {"team-b", "research", {120, 0}},
                 {"team-c", "prod", {100, 0}},
                 {"team-d", "prod", {40, 0}},
                 {"solo", "", {20, 0}}};
  std::vector<AdmissionWorker> workers;
  for (int i = 0; i < kWorkers; ++i) {
    char id[8];
    snprintf(id, sizeof(id), "w%03d", i);
    workers.push_back({id, kSlotsPerWorker, kSlotsPerWorker, false});
  }
  std::vector<int64_t> down_until(kWorkers, 0);
  std::vector<SimJob> jobs(kJobs);
  const char* names[] = {"team-a", "team-b", "team-c", "team-d", "solo"};
  for (int i = 0; i < kJobs; ++i) {
    SimJob& s = jobs[i];
    s.job.id = "j" + std::to_string(1000 + i);
    s.job.queue = names[rng() % 5];
    s.job.user = "u" + std::to_string(rng() % 6);
    s.job.priority = static_cast<int>(rng() % 4);
    s.job.seq = i;
    s.job.slots_per_worker = 1 + static_cast<int>(rng() % 4);
    s.job.min_workers = 1 + static_cast<int>(rng() % (s.job.queue == "solo" ? 4 : 12));
    s.job.elastic = rng() % 3 == 0;
    s.job.max_workers = s.job.min_workers + (s.job.elastic ? static_cast<int>(rng() % 8) : 0);
    s.job.preemptible = rng() % 10 != 0;
    // A job that is not preemptible stays within its queue's own quota; the coordinator
    // refuses at submit one that could never start (SharingManager::CanEverStart).
    for (const QueueConfig& q : base.queues) {
      if (q.name == s.job.queue && s.job.min_workers * s.job.slots_per_worker > q.nominal.slots) {
        s.job.preemptible = true;
      }
    }
    s.arrival = static_cast<int64_t>(rng() % kArrivalWindow);
    s.work = (60 + static_cast<int64_t>(rng() % 3540)) * s.job.min_workers;
  }
  int64_t slot_seconds = 0;
  for (const SimJob& s : jobs) slot_seconds += s.work * s.job.slots_per_worker;
  const int64_t drain = slot_seconds / (kWorkers * kSlotsPerWorker);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < jobs.size(); ++i) index[jobs[i].job.id] = i;
  std::map<std::string, std::map<std::string, Quantity>> usage;
  std::map<std::string, int> preempted;

  int64_t busy_slot_seconds = 0, up_slot_seconds = 0;
  int finished = 0;
  int64_t t = 0;
  Outcome out;
  out.wait_bound = kArrivalWindow + 2 * drain;
  for (; finished < kJobs && t < 10 * out.wait_bound; t += kTick) {
    // Workers fail (about one an hour in all) and come back 10 minutes later; their
    // jobs' gangs lose them: the job goes back to the queue with the work it has left.
    if (rng() % 360 == 0) {
      const int w = static_cast<int>(rng() % kWorkers);
      down_until[w] = t + 600;
      ++out.failures;
      for (SimJob& s : jobs) {
        if (s.job.phase == Phase::kPending || s.finished >= 0) continue;
        for (const std::string& id : s.job.workers) {
          if (id == workers[w].id) {
            s.job.phase = Phase::kPending;
            s.job.workers.clear();
            break;
          }
        }
      }
    }
    // Releases that ended: shrunk jobs go on smaller, preempted ones are requeued.
    for (SimJob& s : jobs) {
      if (s.job.phase != Phase::kReleasing || t < s.releasing_until) continue;
      if (s.requeue_after_release) {
        s.job.phase = Phase::kPending;
        s.job.workers.clear();
      } else {
        s.job.phase = Phase::kRunning;
      }
    }
    // Progress, completions, usage.
    AdmissionSnapshot snap = base;
    snap.workers = workers;
    for (int w = 0; w < kWorkers; ++w) {
      if (t < down_until[w]) snap.workers[w].free_slots = snap.workers[w].total_slots = 0;
    }
    std::map<std::string, std::map<std::string, Quantity>> running_by_user;
    for (SimJob& s : jobs) {
      if (s.finished >= 0 || t < s.arrival) continue;
      if (s.job.phase != Phase::kPending) {
        s.work -= kTick * static_cast<int64_t>(s.job.workers.size());
        if (s.work <= 0 && s.job.phase == Phase::kRunning) {
          s.finished = t;
          ++finished;
          continue;
        }
        for (const std::string& id : s.job.workers) {
          snap.workers[std::stoi(id.substr(1))].free_slots -= s.job.slots_per_worker;
        }
        busy_slot_seconds +=
            kTick * s.job.slots_per_worker * static_cast<int64_t>(s.job.workers.size());
        running_by_user[s.job.queue][s.job.user] +=
            s.job.PerWorker() * static_cast<int64_t>(s.job.workers.size());
      }
      snap.jobs.push_back(s.job);
    }
    for (const AdmissionWorker& w : snap.workers) {
      EXPECT_GE(w.free_slots, 0) << "worker " << w.id << " over-committed at t=" << t;
      up_slot_seconds += kTick * w.total_slots;
    }
    for (auto& [queue, users] : running_by_user) {
      for (auto& [user, q] : users) {
        usage[queue][user] =
            DecayUsage(usage[queue][user], q, absl::Seconds(kTick), absl::Hours(1));
      }
    }
    snap.user_usage = usage;
    // Quotas: a queue beyond its nominal quota only by borrowing within its cohort.
    std::map<std::string, Quantity> used, cohort_used, cohort_nominal;
    for (const AdmissionJob& j : snap.jobs) {
      if (j.phase != Phase::kPending) {
        used[j.queue] += j.PerWorker() * static_cast<int64_t>(j.workers.size());
      }
    }
    for (const QueueConfig& q : base.queues) {
      if (!q.cohort.empty()) {
        cohort_used[q.cohort] += used[q.name];
        cohort_nominal[q.cohort] += q.nominal;
      }
    }
    for (const QueueConfig& q : base.queues) {
      if (q.cohort.empty()) {
        EXPECT_TRUE(used[q.name].FitsIn(q.nominal)) << q.name << " over quota at t=" << t;
      } else {
        EXPECT_TRUE(cohort_used[q.cohort].FitsIn(cohort_nominal[q.cohort]))
            << "cohort " << q.cohort << " over its quotas at t=" << t;
      }
    }
    // One pass, carried out.
    const AdmissionPlan plan = PlanAdmission(snap);
    for (const Admission& a : plan.admit) {
      SimJob& s = jobs[index[a.job_id]];
      s.job.phase = Phase::kRunning;
      s.job.nominated = false;
      s.job.workers = a.worker_ids;
      if (s.started < 0) {
        s.started = t;
        out.starts.push_back({a.job_id, t});
      }
    }
    for (const Shrink& k : plan.shrink) {
      SimJob& s = jobs[index[k.job_id]];
      s.job.workers.resize(k.to_workers);  // gives its last workers back after the release
      s.job.phase = Phase::kReleasing;
      s.releasing_until = t + 30;  // checkpoint and resize
      s.requeue_after_release = false;
      jobs[index[k.for_job]].job.nominated = true;
      ++out.shrinks;
    }
    for (const Preemption& p : plan.preempt) {
      SimJob& s = jobs[index[p.job_id]];
      s.job.phase = Phase::kReleasing;
      s.releasing_until = t + 30;  // checkpoint and stop
      s.requeue_after_release = true;
      jobs[index[p.for_job]].job.nominated = true;
      ++out.preemptions;
      out.most_preempted = std::max(out.most_preempted, ++preempted[p.job_id]);
    }
  }
  out.end = t;
  std::vector<int64_t> waits;
  for (const SimJob& s : jobs) {
    EXPECT_GE(s.finished, 0) << s.job.id << " never finished (queue " << s.job.queue << ", needs "
                             << s.job.min_workers << " x " << s.job.slots_per_worker << ")";
    if (s.started >= 0) waits.push_back(s.started - s.arrival);
  }
  std::sort(waits.begin(), waits.end());
  out.max_wait = waits.empty() ? 0 : waits.back();
  out.median_wait = waits.empty() ? 0 : waits[waits.size() / 2];
  out.utilisation =
      up_slot_seconds > 0 ? static_cast<double>(busy_slot_seconds) / up_slot_seconds : 0;
  return out;
}

TEST(AdmissionSimulationTest, QuotasHoldEveryJobFinishesAndTheSameSeedGivesTheSameOutcome) {
  const Outcome a = Simulate(42);
  EXPECT_LE(a.max_wait, a.wait_bound);
  printf(
      "1000 jobs, 100 workers x 4 slots: all done at %.1f h simulated; utilisation %.1f%%; "
      "wait median %.1f min, max %.1f h (bound %.1f h); %d shrinks, %d preemptions, %d "
      "worker failures; at most %d preemptions of one job\n",
      a.end / 3600.0, 100 * a.utilisation, a.median_wait / 60.0, a.max_wait / 3600.0,
      a.wait_bound / 3600.0, a.shrinks, a.preemptions, a.failures, a.most_preempted);
  const Outcome b = Simulate(42);
  EXPECT_EQ(a.starts, b.starts);
  EXPECT_EQ(a.end, b.end);
  const Outcome c = Simulate(7);  // another seed: the same guarantees
  EXPECT_LE(c.max_wait, c.wait_bound);
  EXPECT_NE(a.starts, c.starts);
}

}  // namespace
}  // namespace baton::coordinator
