#include "coordinator/policy/scale_up.h"

#include <algorithm>

namespace baton::coordinator {

std::vector<std::string> DecideScaleUp(const ScaleUpFacts& facts) {
  std::vector<std::string> joining;
  if (!facts.checkpoints_on_request || !facts.training || !facts.current_ready) return joining;
  const auto room = static_cast<int64_t>(facts.max_workers) -
                    static_cast<int64_t>(facts.current.size());
  for (const WorkerCapacity& w : facts.free) {
    if (static_cast<int64_t>(joining.size()) >= room) break;
    if (w.free_slots >= facts.slots_per_worker &&
        std::find(facts.current.begin(), facts.current.end(), w.worker_id) ==
            facts.current.end()) {
      joining.push_back(w.worker_id);
    }
  }
  return joining;
}

}  // namespace baton::coordinator
