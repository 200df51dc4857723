#pragma once

// Which in-memory snapshot a restarting gang restores (a pure rule, table-tested): every
// rank offers the newest complete snapshot it can read on its host; the gang takes the
// newest offer by (generation, step) that is newer than the disk checkpoint it restored.
//
// Why the generation comes first: ranks of a superseded generation (cut off by a partition)
// may have gone on writing snapshots for a while; once the newer generation has written
// one of its own, theirs never win. A snapshot of a generation older than the restored
// checkpoint's is never taken either: it belongs to a lineage the directory moved past.

#include <cstdint>
#include <optional>
#include <vector>

namespace baton::trainer {

struct SnapshotOffer {
  int rank = 0;
  // Of the newest snapshot the rank found; generation < 0: none.
  int64_t generation = -1;
  int64_t step = 0;
};

// Whether a snapshot of `generation` and `step` may be restored over the disk checkpoint
// (step `disk_step` of generation `disk_generation`): newer, and not of an older generation.
bool NewerThanDisk(int64_t generation, int64_t step, int64_t disk_step, int64_t disk_generation);

// The offer to restore: the newest by (generation, step), the lowest rank among equals;
// nullopt when no offer is newer than the disk checkpoint (step `disk_step` of generation
// `disk_generation`; 0 and 0 when none was restored), i.e. has step > disk_step and
// generation >= disk_generation.
std::optional<SnapshotOffer> ChooseSnapshot(const std::vector<SnapshotOffer>& offers,
                                            int64_t disk_step, int64_t disk_generation);

}  // namespace baton::trainer
