#include "coordinator/policy/slowdown.h"

#include <algorithm>
#include <vector>

namespace baton::coordinator {
namespace {

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

Slowdown::Slowdown(int window) : window_(std::max(1, window)) {}

bool Slowdown::Add(const baton::v1::MetricPoint& point) {
  const auto step_time = point.values().find("time_step_s");
  if (step_time == point.values().end()) return false;
  // In synchronous data parallelism every rank's step takes as long as the slowest's (the
  // others wait for it in the all-reduce): the rank's own work is the step without that wait.
  const auto wait = point.values().find("time_comm_wait_s");
  const double own = wait == point.values().end() ? step_time->second
                                                  : std::max(0.0, step_time->second - wait->second);
  if (point.generation() != generation_) {
    if (point.generation() < generation_) return false;
    generation_ = point.generation();
    step_times_.clear();
  }
  std::deque<double>& times = step_times_[point.rank()];
  times.push_back(own);
  while (static_cast<int>(times.size()) > window_) times.pop_front();
  return true;
}

std::map<int32_t, double> Slowdown::Ratios() const {
  std::map<int32_t, double> out;
  if (step_times_.size() < 2) return out;
  std::map<int32_t, double> recent;
  std::vector<double> values;
  for (const auto& [rank, times] : step_times_) {
    double sum = 0;
    for (double v : times) sum += v;
    recent[rank] = sum / static_cast<double>(times.size());
    values.push_back(recent[rank]);
  }
  const double median = Median(std::move(values));
  if (median <= 0) return out;
  for (const auto& [rank, v] : recent) out[rank] = v / median;
  return out;
}

StragglerDetector::StragglerDetector(int window, double threshold)
    : window_(std::max(1, window)), threshold_(threshold), slowdown_(window) {}

std::optional<StragglerDetector::Straggler> StragglerDetector::Add(
    const baton::v1::MetricPoint& point) {
  const int64_t generation = slowdown_.generation();
  if (!slowdown_.Add(point)) return std::nullopt;
  if (slowdown_.generation() != generation) {
    above_.clear();
    reported_.clear();
  }
  const std::map<int32_t, double> ratios = slowdown_.Ratios();
  const auto it = ratios.find(point.rank());
  int& above = above_[point.rank()];
  if (it == ratios.end() || it->second <= threshold_) {
    above = 0;
    return std::nullopt;
  }
  if (++above < window_ || !reported_.insert(point.rank()).second) return std::nullopt;
  return Straggler{slowdown_.generation(), point.rank(), it->second};
}

std::map<int32_t, double> StragglerDetector::Persistent() const {
  const std::map<int32_t, double> ratios = slowdown_.Ratios();
  std::map<int32_t, double> out;
  for (const auto& [rank, above] : above_) {
    auto it = ratios.find(rank);
    if (above >= window_ && it != ratios.end() && it->second > threshold_) out[rank] = it->second;
  }
  return out;
}

}  // namespace baton::coordinator
