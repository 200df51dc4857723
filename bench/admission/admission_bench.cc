// One scheduling pass at scale: PlanAdmission (coordinator/policy/admission.h) over 10,000
// queued jobs and 1,000 workers, beside a naive pass of the same order and quota rules
// that scans every worker for every job (as policy/scheduler.h's first-come first-served
// Schedule does) after a full re-sort of the queue. Both run on the same snapshot, in
// alternation, --repeats times; prints min/median/max milliseconds of each and last
//   ratio=<PlanAdmission median / naive median>
// The naive pass plans no preemption and holds no reservation (either would only add to
// its time). The snapshot: workers of 8 slots (one in ten with GPUs), five queues in two
// cohorts and one alone, running jobs on most of the cluster, and --jobs queued jobs of
// 1-16 workers x 1-8 slots, priorities 0-3, elastic ones, from 50 users.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/admission/summary.h"
#include "coordinator/policy/admission.h"

ABSL_FLAG(int, jobs, 10000, "Queued jobs.");
ABSL_FLAG(int, workers, 1000, "Workers.");
ABSL_FLAG(int, repeats, 21, "Passes of each.");
ABSL_FLAG(uint32_t, seed, 1, "Snapshot seed.");

namespace baton::coordinator {
namespace {

AdmissionSnapshot MakeSnapshot(int n_jobs, int n_workers, uint32_t seed) {
  std::mt19937 rng(seed);
  AdmissionSnapshot s;
  const int64_t slots = int64_t{n_workers} * 8;
  s.queues = {{"team-a", "research", {slots * 3 / 10, slots / 50}},
              {"team-b", "research", {slots * 3 / 10, slots / 50}},
              {"team-c", "prod", {slots * 2 / 10, slots / 50}},
              {"team-d", "prod", {slots / 10, slots / 100}},
              {"solo", "", {slots / 10, 0}}};
  for (int i = 0; i < n_workers; ++i) {
    char id[16];
    snprintf(id, sizeof(id), "w%05d", i);
    s.workers.push_back({id, 8, 8, i % 10 == 0});
  }
  const char* queues[] = {"team-a", "team-b", "team-c", "team-d", "solo"};
  // Running jobs: 4 workers x 2 slots each, until about 90% of the slots are taken.
  int64_t seq = 0;
  for (int w = 0; w + 4 <= n_workers; w += 4) {
    for (int k = 0; k < 3; ++k) {  // 3 jobs x 2 slots per worker = 6 of 8 slots
      AdmissionJob j;
      j.id = "r" + std::to_string(seq);
      j.queue = queues[(w / 4 + k) % 4];
      j.user = "u" + std::to_string(rng() % 50);
      j.seq = seq++;
      j.phase = AdmissionJob::Phase::kRunning;
      j.slots_per_worker = 2;
      j.min_workers = j.max_workers = 4;
      for (int x = 0; x < 4; ++x) {
        j.workers.push_back(s.workers[w + x].id);
        s.workers[w + x].free_slots -= 2;
      }
      s.jobs.push_back(std::move(j));
    }
  }
  for (int i = 0; i < n_jobs; ++i) {
    AdmissionJob j;
    j.id = "j" + std::to_string(seq);
    j.queue = queues[rng() % 5];
    j.user = "u" + std::to_string(rng() % 50);
    j.seq = seq++;
    j.priority = static_cast<int>(rng() % 4);
    j.slots_per_worker = 1 + static_cast<int>(rng() % 8);
    j.gpu = rng() % 20 == 0;
    j.min_workers = 1 + static_cast<int>(rng() % 16);
    j.elastic = rng() % 3 == 0;
    j.max_workers = j.min_workers + (j.elastic ? static_cast<int>(rng() % 8) : 0);
    s.jobs.push_back(std::move(j));
  }
  for (int u = 0; u < 50; ++u) {
    s.user_usage[queues[u % 5]]["u" + std::to_string(u)] = {int64_t{1000} * (u % 7), 0};
  }
  return s;
}

// The naive pass: the same order and quota rules; every worker scanned for every job.
size_t NaivePass(const AdmissionSnapshot& s) {
  std::map<std::string, Quantity> used, cohort_used, cohort_nominal;
  std::map<std::string, const QueueConfig*> queues;
  for (const QueueConfig& q : s.queues) {
    queues[q.name] = &q;
    if (!q.cohort.empty()) cohort_nominal[q.cohort] += q.nominal;
  }
  std::vector<const AdmissionJob*> pending;
  for (const AdmissionJob& j : s.jobs) {
    if (j.phase == AdmissionJob::Phase::kPending) {
      pending.push_back(&j);
      continue;
    }
    const Quantity q = j.PerWorker() * static_cast<int64_t>(j.workers.size());
    used[j.queue] += q;
    if (!queues.at(j.queue)->cohort.empty()) cohort_used[queues.at(j.queue)->cohort] += q;
  }
  std::vector<AdmissionWorker> workers = s.workers;
  std::sort(pending.begin(), pending.end(), [&](const AdmissionJob* a, const AdmissionJob* b) {
    const auto share = [&](const AdmissionJob* j) {
      const QueueConfig* q = queues.at(j->queue);
      return q->nominal.slots > 0 ? double(used[j->queue].slots) / q->nominal.slots : 0.0;
    };
    return std::make_tuple(-a->priority, share(a), a->seq) <
           std::make_tuple(-b->priority, share(b), b->seq);
  });
  size_t admitted = 0;
  for (const AdmissionJob* j : pending) {
    const QueueConfig* q = queues.at(j->queue);
    const Quantity need = j->PerWorker() * j->min_workers;
    const bool quota = q->cohort.empty()
                           ? (used[q->name] + need).FitsIn(q->nominal)
                           : (cohort_used[q->cohort] + need).FitsIn(cohort_nominal[q->cohort]);
    if (!quota) continue;
    std::vector<AdmissionWorker*> fitting;
    for (AdmissionWorker& w : workers) {
      if ((!j->gpu || w.gpus) && w.free_slots >= j->slots_per_worker) fitting.push_back(&w);
    }
    if (static_cast<int>(fitting.size()) < j->min_workers) continue;
    fitting.resize(std::min<size_t>(fitting.size(), j->max_workers));
    for (AdmissionWorker* w : fitting) w->free_slots -= j->slots_per_worker;
    const Quantity taken = j->PerWorker() * static_cast<int64_t>(fitting.size());
    used[q->name] += taken;
    if (!q->cohort.empty()) cohort_used[q->cohort] += taken;
    ++admitted;
  }
  return admitted;
}

}  // namespace
}  // namespace baton::coordinator

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using baton::coordinator::AdmissionPlan;
  const auto s = baton::coordinator::MakeSnapshot(
      absl::GetFlag(FLAGS_jobs), absl::GetFlag(FLAGS_workers), absl::GetFlag(FLAGS_seed));
  std::vector<double> plan_ms, naive_ms;
  size_t admitted = 0, naive_admitted = 0, pending = 0;
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    auto t0 = std::chrono::steady_clock::now();
    const AdmissionPlan p = baton::coordinator::PlanAdmission(s);
    auto t1 = std::chrono::steady_clock::now();
    naive_admitted = baton::coordinator::NaivePass(s);
    auto t2 = std::chrono::steady_clock::now();
    admitted = p.admit.size();
    pending = p.pending.size();
    plan_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
    naive_ms.push_back(std::chrono::duration<double, std::milli>(t2 - t1).count());
  }
  const auto a = baton::bench::Summarise(plan_ms);
  const auto b = baton::bench::Summarise(naive_ms);
  printf("%d queued jobs, %d workers; %zu admitted, %zu left pending (naive admitted %zu)\n",
         absl::GetFlag(FLAGS_jobs), absl::GetFlag(FLAGS_workers), admitted, pending,
         naive_admitted);
  printf("PlanAdmission  ms: min %.2f median %.2f max %.2f\n", a.min, a.median, a.max);
  printf("naive pass     ms: min %.2f median %.2f max %.2f\n", b.min, b.median, b.max);
  printf("ratio=%.3f\n", a.median / b.median);
  return 0;
}
