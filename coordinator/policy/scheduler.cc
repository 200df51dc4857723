#include "coordinator/policy/scheduler.h"

#include <algorithm>
#include <set>
#include <string>

namespace baton::coordinator {

std::vector<Placement> Schedule(const std::vector<PendingJob>& queue,
                                std::vector<WorkerCapacity> workers) {
  std::sort(workers.begin(), workers.end(),
            [](const WorkerCapacity& a, const WorkerCapacity& b) {
              return a.worker_id < b.worker_id;
            });
  std::vector<Placement> placements;
  for (const PendingJob& job : queue) {
    std::vector<WorkerCapacity*> fitting;
    for (WorkerCapacity& w : workers) {
      if (static_cast<int>(fitting.size()) == job.max_workers) break;
      if (w.free_slots >= job.slots_per_worker) fitting.push_back(&w);
    }
    if (static_cast<int>(fitting.size()) < job.min_workers) continue;
    Placement p;
    p.job_id = job.job_id;
    for (WorkerCapacity* w : fitting) {
      w->free_slots -= job.slots_per_worker;
      p.worker_ids.push_back(w->worker_id);
    }
    placements.push_back(std::move(p));
  }
  return placements;
}

std::vector<std::string> PlaceRestart(const std::vector<std::string>& previous,
                                      const PendingJob& job,
                                      std::vector<WorkerCapacity> workers) {
  std::sort(workers.begin(), workers.end(),
            [](const WorkerCapacity& a, const WorkerCapacity& b) {
              return a.worker_id < b.worker_id;
            });
  const size_t max_workers = static_cast<size_t>(std::max(job.max_workers, 0));
  std::set<std::string> fitting;
  for (const WorkerCapacity& w : workers) {
    if (w.free_slots >= job.slots_per_worker) fitting.insert(w.worker_id);
  }
  // Who: survivors first (in their old order), then new workers (by id), up to max.
  std::set<std::string> survivors;
  for (const std::string& w : previous) {
    if (survivors.size() < max_workers && fitting.count(w) > 0) survivors.insert(w);
  }
  std::vector<std::string> newcomers;
  for (const WorkerCapacity& w : workers) {
    if (survivors.size() + newcomers.size() >= max_workers) break;
    const bool was_there =
        std::find(previous.begin(), previous.end(), w.worker_id) != previous.end();
    if (!was_there && fitting.count(w.worker_id) > 0) newcomers.push_back(w.worker_id);
  }
  if (survivors.size() + newcomers.size() < static_cast<size_t>(job.min_workers)) return {};
  // Where: survivors keep their places, new workers fill the holes, then the rest.
  std::vector<std::string> gang;
  size_t next_newcomer = 0;
  for (const std::string& w : previous) {
    if (survivors.count(w) > 0) {
      gang.push_back(w);
    } else if (next_newcomer < newcomers.size()) {
      gang.push_back(newcomers[next_newcomer++]);
    }
  }
  while (next_newcomer < newcomers.size()) gang.push_back(newcomers[next_newcomer++]);
  return gang;
}

}  // namespace baton::coordinator
