#include "worker/trainer/snapshot/snapshot_choice.h"

#include <tuple>

namespace baton::trainer {

bool NewerThanDisk(int64_t generation, int64_t step, int64_t disk_step, int64_t disk_generation) {
  return generation >= 0 && generation >= disk_generation && step > disk_step;
}

std::optional<SnapshotOffer> ChooseSnapshot(const std::vector<SnapshotOffer>& offers,
                                            int64_t disk_step, int64_t disk_generation) {
  std::optional<SnapshotOffer> best;
  for (const SnapshotOffer& o : offers) {
    if (!NewerThanDisk(o.generation, o.step, disk_step, disk_generation)) continue;
    if (!best.has_value() ||
        std::tie(o.generation, o.step) > std::tie(best->generation, best->step) ||
        (o.generation == best->generation && o.step == best->step && o.rank < best->rank)) {
      best = o;
    }
  }
  return best;
}

}  // namespace baton::trainer
