#include "coordinator/policy/goodput.h"

#include <algorithm>

namespace baton::coordinator {

void ProductiveTime::Add(const baton::v1::MetricPoint& point) {
  if (point.rank() != 0) return;
  const auto step_time = point.values().find("time_step_s");
  if (point.step() > max_step && step_time != point.values().end()) {
    seconds += step_time->second * static_cast<double>(point.step() - max_step);
  }
  max_step = std::max(max_step, point.step());
}

std::optional<double> GoodputRatio(const ProductiveTime& productive, absl::Time start,
                                   absl::Time end, absl::Time now) {
  if (start == absl::InfinitePast()) return std::nullopt;
  const absl::Duration wall = std::min(now, end) - start;
  if (wall <= absl::ZeroDuration()) return std::nullopt;
  return std::min(1.0, productive.seconds / absl::ToDoubleSeconds(wall));
}

}  // namespace baton::coordinator
