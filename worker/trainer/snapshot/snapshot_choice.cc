#include "worker/trainer/snapshot/snapshot_choice.h"

#include <tuple>

namespace baton::trainer {

std::optional<SnapshotOffer> ChooseSnapshot(const std::vector<SnapshotOffer>& offers,
                                            int64_t disk_step, int64_t disk_generation) {
  std::optional<SnapshotOffer> best;
  for (const SnapshotOffer& o : offers) {
    if (o.generation < 0 || o.generation < disk_generation || o.step <= disk_step) continue;
    if (!best.has_value() ||
        std::tie(o.generation, o.step) > std::tie(best->generation, best->step) ||
        (o.generation == best->generation && o.step == best->step && o.rank < best->rank)) {
      best = o;
    }
  }
  return best;
}

}  // namespace baton::trainer
