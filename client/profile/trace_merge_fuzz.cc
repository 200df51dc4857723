// Fuzz target: `baton profile`'s merge of the ranks' Chrome traces (MergeChromeTraces), whose
// input is JSON that ranks wrote (a tenant's job can write anything there). The input is
// one or more traces separated by NUL bytes, rank 0, 1, ... Invariants: no crash; every
// error is INVALID_ARGUMENT naming a rank; a merged trace is itself a valid trace (it
// merges again as one rank's).

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "client/profile/trace_merge.h"
#include "tools/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<baton::cli::RankTraceJson> traces;
  int32_t rank = 0;
  for (absl::string_view part : absl::StrSplit(input, '\0')) {
    traces.push_back({rank++, std::string(part)});
    if (traces.size() == 8) break;
  }
  const auto merged = baton::cli::MergeChromeTraces(traces, "j-000001", 3);
  if (!merged.ok()) {
    FUZZ_CHECK(merged.status().code() == absl::StatusCode::kInvalidArgument);
    FUZZ_CHECK(absl::StrContains(merged.status().message(), "rank"));
    return 0;
  }
  const auto again = baton::cli::MergeChromeTraces({{0, *merged}}, "j-000001", 3);
  FUZZ_CHECK(again.ok());
  return 0;
}
