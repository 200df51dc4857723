#include "coordinator/scheduler.h"

#include <algorithm>

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

}  // namespace baton::coordinator
