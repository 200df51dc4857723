#pragma once

#include <optional>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"

namespace baton::worker {

// Parses one line a training process wrote on BATON_METRICS_FD: a JSON object such as
//   {"step":10,"epoch":0,"loss":0.71,"accuracy":0.8,"samples_per_sec":1234.5,"lr":0.05}
// into a MetricPoint with `step` (from "step"; 0 if absent) and `values` (every other key
// with a numeric value; keys with non-numeric values are skipped). time, rank and generation
// are left unset for the caller. Errors: INVALID_ARGUMENT if the line is not a JSON object or
// "step" is not a non-negative integer.
absl::StatusOr<baton::v1::MetricPoint> ParseMetricsLine(absl::string_view line);

// The heartbeat a parsed line is (contract.h, "Heartbeat lines": it has the "beat" key),
// with generation and rank from the point and age unset; nullopt for a metric line.
// Unknown phase codes become "unknown"; negative durations and counts read as zero.
std::optional<baton::v1::RankBeat> HeartbeatFromPoint(const baton::v1::MetricPoint& point);

}  // namespace baton::worker
