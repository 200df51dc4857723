// Fuzz target: a rank's metrics pipe as the worker reads it. The bytes are split into lines
// (LineSplitter, fed in uneven chunks), each line made valid UTF-8 and parsed as a metric
// line. Invariants: no crash, lines within the splitter's bound, a parsed step is never
// negative, and sanitising is idempotent.

#include <cstddef>
#include <cstdint>

#include "absl/strings/string_view.h"
#include "tools/fuzz/fuzz_check.h"
#include "worker/output/line_splitter.h"
#include "worker/trainer/contract/metrics_line.h"

namespace {

constexpr size_t kMaxLineBytes = 512;

void CheckLine(const baton::worker::LineSplitter::Line& line) {
  FUZZ_CHECK(line.text.size() <= kMaxLineBytes);
  const std::string text = baton::worker::SanitizeUtf8(line.text);
  FUZZ_CHECK(baton::worker::SanitizeUtf8(text) == text);
  const auto point = baton::worker::ParseMetricsLine(text);
  if (point.ok()) FUZZ_CHECK(point->step() >= 0);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  baton::worker::LineSplitter splitter(kMaxLineBytes);
  // Chunk sizes 1, 2, 3, ... so that lines straddle Feed calls at every offset.
  size_t chunk = 1;
  for (size_t at = 0; at < bytes.size(); at += chunk++) {
    splitter.Feed(bytes.substr(at, chunk), CheckLine);
  }
  splitter.Finish(CheckLine);
  return 0;
}
