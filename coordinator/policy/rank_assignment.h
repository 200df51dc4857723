#pragma once

#include <string>
#include <vector>

namespace baton::coordinator {

// One training process's place in a generation.
struct RankSlot {
  int rank = 0;              // global rank
  int local_rank = 0;        // rank within its worker
  int local_world_size = 0;  // processes on its worker
  int group_rank = 0;        // index of its worker in the gang
  std::string worker_id;

  bool operator==(const RankSlot& o) const {
    return rank == o.rank && local_rank == o.local_rank &&
           local_world_size == o.local_world_size && group_rank == o.group_rank &&
           worker_id == o.worker_id;
  }
};

// Assigns ranks to a gang: worker i of `worker_ids` (in the given order) is group_rank i
// and runs `slots_per_worker` processes, ranks i*slots_per_worker .. +slots_per_worker-1,
// local ranks 0..slots_per_worker-1. One rank per slot. Pure; the caller chooses the
// worker order (the scheduler sorts by worker id so the result is stable).
// Requires slots_per_worker >= 1; returns rank-ordered slots.
std::vector<RankSlot> AssignRanks(const std::vector<std::string>& worker_ids,
                                  int slots_per_worker);

}  // namespace baton::coordinator
