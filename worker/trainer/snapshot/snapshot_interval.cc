#include "worker/trainer/snapshot/snapshot_interval.h"

#include <algorithm>
#include <cmath>

namespace baton::trainer {

absl::Duration SnapshotCost(const SnapshotCosts& costs) {
  const absl::Duration slowdown =
      costs.clean_step > absl::ZeroDuration()
          ? std::max(costs.copy_step - costs.clean_step, absl::ZeroDuration())
          : absl::ZeroDuration();
  return costs.plan + std::max(slowdown, costs.copy);
}

std::optional<int64_t> AutoSnapshotInterval(const SnapshotCosts& costs, double budget) {
  const absl::Duration step =
      costs.clean_step > absl::ZeroDuration() ? costs.clean_step : costs.step;
  if (step <= absl::ZeroDuration()) return std::nullopt;
  return std::clamp<int64_t>(
      static_cast<int64_t>(std::ceil(absl::FDivDuration(SnapshotCost(costs), step * budget))), 1,
      kMaxSnapshotInterval);
}

}  // namespace baton::trainer
