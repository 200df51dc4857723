#pragma once

// Test helpers for metrics: read series out of collected Prometheus families
// (Registry::Collect() or a Collectable's Collect()), so tests assert on the values a scrape
// would serve, and build the trainer's metric points that feed them.

#include <prometheus/metric_family.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "baton/v1/job.pb.h"

namespace baton::metrics_testing {

// One series of a scrape, the one whose labels are exactly `labels`: a counter's or
// gauge's value, or a histogram's sample count (`what` = "" or "count") or sum ("sum").
// nullopt if no such series is exported (or the family is of another type).
inline std::optional<double> Value(const std::vector<prometheus::MetricFamily>& families,
                                   const std::string& name,
                                   const std::map<std::string, std::string>& labels,
                                   const std::string& what = "") {
  for (const prometheus::MetricFamily& f : families) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      std::map<std::string, std::string> got;
      for (const auto& l : m.label) got[l.name] = l.value;
      if (got != labels) continue;
      switch (f.type) {
        case prometheus::MetricType::Counter:
          return m.counter.value;
        case prometheus::MetricType::Gauge:
          return m.gauge.value;
        case prometheus::MetricType::Histogram:
          return what == "sum" ? m.histogram.sample_sum
                               : static_cast<double>(m.histogram.sample_count);
        default:
          return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

// A trainer metric point of `rank` in `generation` at global `step` with `values`.
inline baton::v1::MetricPoint Point(int64_t generation, int32_t rank, int64_t step,
                                    const std::map<std::string, double>& values) {
  baton::v1::MetricPoint p;
  p.set_generation(generation);
  p.set_rank(rank);
  p.set_step(step);
  for (const auto& [key, value] : values) (*p.mutable_values())[key] = value;
  return p;
}

// The same with only a step time: `step_s` seconds per step (time_step_s).
inline baton::v1::MetricPoint Point(int64_t generation, int32_t rank, int64_t step,
                                    double step_s) {
  return Point(generation, rank, step, {{"time_step_s", step_s}});
}

}  // namespace baton::metrics_testing
