#pragma once

// How often the auto rule (TrainerSpec snapshot_every 0) takes an in-memory snapshot: the
// fewest steps between snapshots that keep their cost within a budget share of the step
// time (a pure rule over measured moving averages, table-tested).
//
// A snapshot's cost is planning it plus the larger of its copy's own time and how much
// longer a step that overlaps the copy takes than one that does not. The copy is counted
// whole even when the steps seem to hide it: where no core is idle (CPU training) it takes
// its time from the ranks, and the difference in step times, within the noise of a busy
// host, missed most of that (measured: 0.82 of the snapshot-free throughput at the
// interval that rule chose, 0.95 at one four times longer).
//
// The budget. Data-parallel CPU ranks snapshot their last completed step when they lose a
// peer (TrainingSession::SnapshotOnPeerLoss), so the periodic snapshots there cover only
// the losses no writer rank survives: 1 % of the step time does. Elsewhere (GPU ranks exit
// on a peer's loss; with ZeRO a lost rank's optimizer shard is gone with it) the periodic
// snapshot is what a single failure restores from: 5 %.

#include <cstdint>
#include <optional>

#include "absl/time/time.h"

namespace baton::trainer {

inline constexpr double kSnapshotBudget = 0.05;
inline constexpr double kSnapshotBudgetWithLossSnapshots = 0.01;
inline constexpr int64_t kMaxSnapshotInterval = 1000;

// Moving averages; zero = not measured yet.
struct SnapshotCosts {
  absl::Duration step;        // Every step.
  absl::Duration clean_step;  // Steps without a snapshot copy in flight.
  absl::Duration copy_step;   // Steps with one.
  absl::Duration plan;        // Planning a snapshot (on the training thread).
  absl::Duration copy;        // A copy's own time.
};

// The snapshot's cost as described above.
absl::Duration SnapshotCost(const SnapshotCosts& costs);

// ceil(cost / (budget x step time)) within [1, kMaxSnapshotInterval], the step time being
// clean_step's when measured, else step's; nullopt while neither is.
std::optional<int64_t> AutoSnapshotInterval(const SnapshotCosts& costs, double budget);

}  // namespace baton::trainer
