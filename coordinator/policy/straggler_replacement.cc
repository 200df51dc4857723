#include "coordinator/policy/straggler_replacement.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_format.h"

namespace baton::coordinator {

std::vector<StragglerReplacement> StragglersToReplace(const std::vector<SlowWorker>& slow,
                                                      const std::vector<std::string>& previous,
                                                      const std::vector<WorkerCapacity>& workers,
                                                      int slots_per_worker, double threshold,
                                                      int window) {
  const std::set<std::string> in_gang(previous.begin(), previous.end());
  int spares = 0;
  for (const WorkerCapacity& w : workers) {
    if (!in_gang.count(w.worker_id) && w.free_slots >= slots_per_worker) {
      ++spares;
    }
  }
  std::vector<SlowWorker> order;
  for (const SlowWorker& s : slow) {
    if (in_gang.count(s.worker_id)) order.push_back(s);
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const SlowWorker& a, const SlowWorker& b) { return a.ratio > b.ratio; });
  std::vector<StragglerReplacement> out;
  std::set<std::string> taken;
  for (const SlowWorker& s : order) {
    if (spares == 0) break;
    if (!taken.insert(s.worker_id).second) continue;  // several slow ranks on one worker
    --spares;
    out.push_back(
        {s.worker_id, absl::StrFormat("rank %d at %.2fx the median step time of the job's ranks "
                                      "(above %.2fx at each of its last %d metric points)",
                                      s.rank, s.ratio, threshold, window)});
  }
  return out;
}

std::vector<WorkerCapacity> WithoutBenched(std::vector<WorkerCapacity> workers,
                                           const std::map<std::string, absl::Time>& benched,
                                           absl::Time now) {
  workers.erase(std::remove_if(workers.begin(), workers.end(),
                               [&](const WorkerCapacity& w) {
                                 auto it = benched.find(w.worker_id);
                                 return it != benched.end() && now < it->second;
                               }),
                workers.end());
  return workers;
}

}  // namespace baton::coordinator
