// The coordinator's reconcile tick at scale, with and without queues: two real Coordinators
// (JobManager over in-memory SQLite, WorkerRegistry, every manager) each hold --workers
// workers of 8 slots, full (jobs of 4 workers x 2 slots placed on them, in RENDEZVOUS), and
// --jobs waiting jobs of 1-8 workers x 1-4 slots. One runs with a queue file (every pass
// goes through SharingManager: its snapshot of the records, PlanAdmission, the why-pending
// of each waiting job kept for `baton describe`), the other first come, first served
// (policy/scheduler.h: every worker scanned for every waiting job). ReconcileOnce on each,
// in alternation, --repeats times; prints min/median/max milliseconds and last
//   ratio=<queues median / first-come-first-served median>
// Nothing can start (the cluster is full), so each tick does the same work every time.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "bench/admission/summary.h"
#include "absl/strings/str_cat.h"
#include "common/protocol_version.h"
#include "common/time/testing/fake_clock.h"
#include "coordinator/control/coordinator.h"
#include "coordinator/control/worker_registry.h"
#include "coordinator/jobs/job_manager.h"
#include "coordinator/queues/queue_file.h"
#include "coordinator/store/store.h"
#include "coordinator/testing/fake_channel.h"

ABSL_FLAG(int, jobs, 10000, "Waiting jobs.");
ABSL_FLAG(int, workers, 1000, "Workers (8 slots each).");
ABSL_FLAG(int, repeats, 21, "Ticks of each.");

namespace baton::coordinator {
namespace {

constexpr const char* kQueues[] = {"team-a", "team-b", "team-c", "team-d", "solo"};

baton::v1::JobSpec Spec(int workers, int slots) {
  baton::v1::JobSpec spec;
  spec.set_name("bench");
  spec.mutable_command()->add_argv("/bin/true");
  spec.mutable_workers()->set_min(workers);
  spec.set_slots_per_worker(slots);
  return spec;
}

// A coordinator over its own store, its cluster full, `jobs` waiting.
struct Cluster {
  FakeClock clock;
  std::unique_ptr<Store> store;
  std::unique_ptr<JobManager> jobs;
  std::unique_ptr<WorkerRegistry> workers;
  std::unique_ptr<Coordinator> coordinator;

  Cluster(bool queues, int n_workers, int n_jobs) {
    store = *Store::Open(":memory:");
    jobs = std::make_unique<JobManager>(store.get(), &clock);
    if (!jobs->Load().ok()) std::abort();
    workers = std::make_unique<WorkerRegistry>(&clock);
    coordinator = std::make_unique<Coordinator>(jobs.get(), workers.get(), &clock,
                                                CoordinatorOptions());
    if (!coordinator->Recover().ok()) std::abort();
    const int64_t slots = int64_t{n_workers} * 8;
    if (queues) {
      const std::string file = absl::StrCat(
          "queues:\n", "  - {name: team-a, cohort: research, quota: {slots: ", slots * 3 / 10,
          "}, users: [\"*\"]}\n", "  - {name: team-b, cohort: research, quota: {slots: ",
          slots * 3 / 10, "}, users: [\"*\"]}\n",
          "  - {name: team-c, cohort: prod, quota: {slots: ", slots * 2 / 10,
          "}, users: [\"*\"]}\n", "  - {name: team-d, cohort: prod, quota: {slots: ", slots / 10,
          "}, users: [\"*\"]}\n", "  - {name: solo, quota: {slots: ", slots / 10,
          "}, users: [\"*\"]}\n");
      absl::StatusOr<QueueSet> set = ParseQueueFile(file, "bench-queues.yaml");
      if (!set.ok()) {
        std::fprintf(stderr, "%s\n", set.status().ToString().c_str());
        std::abort();
      }
      coordinator->SetQueues(*set);
    }
    for (int i = 0; i < n_workers; ++i) {
      baton::v1::Register reg;
      reg.set_worker_id(absl::StrCat("w", 100000 + i));
      reg.mutable_resources()->set_slots(8);
      reg.set_protocol_version(kProtocolVersion);
      if (!coordinator->OnWorkerConnected(reg, "10.0.0.1", std::make_shared<NullChannel>()).ok()) {
        std::abort();
      }
    }
    // Fill the cluster: 4 jobs of 4 workers x 2 slots per 4 workers, to each queue its
    // quota's share.
    constexpr int kShare[10] = {0, 0, 0, 1, 1, 1, 2, 2, 3, 4};
    for (int i = 0; i < n_workers; ++i) {
      baton::v1::JobSpec spec = Spec(4, 2);
      if (queues) spec.set_queue(kQueues[kShare[i % 10]]);
      if (!coordinator->SubmitJob(spec, "", absl::StrCat("u", i % 50)).ok()) std::abort();
    }
    // The waiting jobs, written directly (a SubmitJob would schedule at each).
    std::mt19937 rng(1);
    for (int i = 0; i < n_jobs; ++i) {
      const int w = 1 + static_cast<int>(rng() % 8), s = 1 + static_cast<int>(rng() % 4);
      baton::v1::JobQueueing q;
      if (queues) {
        q.set_queue(kQueues[rng() % 5]);
        q.set_priority(static_cast<int>(rng() % 4));
      }
      if (!jobs->Submit(Spec(w, s), "", absl::StrCat("u", rng() % 50), q).ok()) std::abort();
    }
    coordinator->FlushStaged();
  }
};

double TickMs(Cluster& c) {
  const auto t0 = std::chrono::steady_clock::now();
  c.coordinator->ReconcileOnce();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count();
}

}  // namespace
}  // namespace baton::coordinator

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  using baton::coordinator::Cluster;
  const int n_jobs = absl::GetFlag(FLAGS_jobs), n_workers = absl::GetFlag(FLAGS_workers);
  Cluster shared(true, n_workers, n_jobs);
  Cluster fcfs(false, n_workers, n_jobs);
  const auto count = [](Cluster& c, baton::coordinator::JobState s) {
    return c.jobs->JobsIn({s}).size();
  };
  std::vector<double> shared_ms, fcfs_ms;
  for (int r = 0; r < 3; ++r) {  // warm-up: whatever still fits starts here
    baton::coordinator::TickMs(shared);
    baton::coordinator::TickMs(fcfs);
  }
  for (int r = 0; r < absl::GetFlag(FLAGS_repeats); ++r) {
    shared_ms.push_back(baton::coordinator::TickMs(shared));
    fcfs_ms.push_back(baton::coordinator::TickMs(fcfs));
  }
  using baton::coordinator::JobState;
  std::printf("%d workers x 8 slots; queues: %zu placed, %zu waiting; fcfs: %zu placed, %zu "
              "waiting\n",
              n_workers, count(shared, JobState::kRendezvous), count(shared, JobState::kQueued),
              count(fcfs, JobState::kRendezvous), count(fcfs, JobState::kQueued));
  const auto a = baton::bench::Summarise(shared_ms);
  const auto b = baton::bench::Summarise(fcfs_ms);
  std::printf("tick with queues  ms: min %.2f median %.2f max %.2f\n", a.min, a.median, a.max);
  std::printf("tick first-come   ms: min %.2f median %.2f max %.2f\n", b.min, b.median, b.max);
  std::printf("ratio=%.3f\n", a.median / b.median);
  return 0;
}
