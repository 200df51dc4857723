#include "coordinator/policy/rank_assignment.h"

namespace baton::coordinator {

std::vector<RankSlot> AssignRanks(const std::vector<std::string>& worker_ids,
                                  int slots_per_worker) {
  std::vector<RankSlot> slots;
  slots.reserve(worker_ids.size() * slots_per_worker);
  for (int group = 0; group < static_cast<int>(worker_ids.size()); ++group) {
    for (int local = 0; local < slots_per_worker; ++local) {
      RankSlot s;
      s.rank = group * slots_per_worker + local;
      s.local_rank = local;
      s.local_world_size = slots_per_worker;
      s.group_rank = group;
      s.worker_id = worker_ids[group];
      slots.push_back(s);
    }
  }
  return slots;
}

}  // namespace baton::coordinator
