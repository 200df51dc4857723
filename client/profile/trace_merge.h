#pragma once

// `baton profile`: merges the ranks' Chrome traces (worker/trainer/profile/trace.h, JSON
// object form) into one file a trace viewer (Perfetto, chrome://tracing) opens with one
// process per rank on one time axis.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::cli {

struct RankTraceJson {
  int32_t rank = 0;
  std::string json;  // One rank's trace: an object with a "traceEvents" list.
};

// One Chrome trace: every rank's traceEvents, in rank order, each event unchanged (numbers
// keep their exact text); a process_name metadata event "rank R" (pid R) for a rank whose
// trace names no process; "displayTimeUnit":"ms"; otherData {job_id, generation, ranks,
// windows: every rank's otherData.windows entries}. Errors: INVALID_ARGUMENT naming the
// rank and the byte offset if a trace is not valid JSON or has no "traceEvents" list.
absl::StatusOr<std::string> MergeChromeTraces(const std::vector<RankTraceJson>& traces,
                                              const std::string& job_id, int64_t generation);

}  // namespace baton::cli
