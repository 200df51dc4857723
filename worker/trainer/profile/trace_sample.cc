// Writes a two-rank Chrome trace with awkward names (quotes, control characters, bytes that
// are not UTF-8) to stdout, for trace_format_test.sh, which checks it against the Trace
// Event Format.
#include <iostream>

#include "absl/time/time.h"
#include "worker/trainer/profile/trace.h"

int main() {
  using baton::trainer::TraceProcess;
  using baton::trainer::TraceSpan;
  const int64_t t0 = 1'700'000'000'000'000;
  auto span = [](std::string name, std::string cat, int64_t start, int64_t dur, int thread) {
    TraceSpan s;
    s.name = std::move(name);
    s.category = std::move(cat);
    s.start = absl::FromUnixMicros(start);
    s.duration = absl::Microseconds(dur);
    s.thread = thread;
    return s;
  };
  std::vector<TraceSpan> rank0 = {span("data", "step", t0, 10, 0),
                                  span("forward", "step", t0 + 10, 40, 0),
                                  span("backward", "step", t0 + 50, 80, 0),
                                  span("allreduce bucket 0", "comm", t0 + 90, 30, 1),
                                  span("optimizer", "step", t0 + 130, 20, 0),
                                  span("name \"quoted\"\n\x01 \xff", "odd", t0 + 150, 1, 0)};
  rank0[3].int_args["bytes"] = 1 << 20;
  std::vector<TraceSpan> rank1 = {span("forward", "step", t0 + 12, 41, 0),
                                  span("allreduce bucket 0", "comm", t0 + 92, 28, 1)};
  std::cout << baton::trainer::ChromeTraceJson(
      {{TraceProcess{0, "j-1", "h0", 0}, rank0}, {TraceProcess{1, "j-1", "h1", 0}, rank1}});
  return 0;
}
