#pragma once

// Spans of a training window for the step profiler (`baton profile`, issue 14): what one
// rank did when, written as a Chrome trace (the Trace Event Format's JSON object form,
// which Perfetto and chrome://tracing load). Spans carry wall-clock times (the injected
// Clock's), so the traces of several ranks merged into one file line up on one time axis
// as far as the hosts' clocks agree.
//
// TraceRecorder is bounded: it keeps at most `max_spans` spans and counts the rest as
// dropped (reported in the trace's metadata), so a window too long for memory degrades
// instead of growing without limit. Thread-safe: the training thread and LibTorch's
// autograd thread (bucket all-reduces started during backward) both record.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace baton::trainer {

// Threads of a rank's trace: the training loop, and the collectives it waits for.
inline constexpr int kTrainingTraceThread = 0;
inline constexpr int kCommTraceThread = 1;

struct TraceSpan {
  std::string name;      // e.g. "forward", "allreduce bucket 3"
  std::string category;  // e.g. "step", "comm", "checkpoint"
  absl::Time start;
  absl::Duration duration;
  int thread = kTrainingTraceThread;
  // Free-form details shown with the span: numbers (bytes, step) and strings.
  std::map<std::string, int64_t> int_args;
  std::map<std::string, std::string> string_args;
};

class TraceRecorder {
 public:
  explicit TraceRecorder(size_t max_spans = 1 << 20) : max_spans_(max_spans) {}

  // Keeps `span` unless max_spans are kept already (then counts it as dropped).
  void Record(TraceSpan span);
  // The spans recorded so far, in recording order, and how many were dropped.
  std::vector<TraceSpan> Spans() const;
  int64_t dropped() const;
  void Clear();

 private:
  const size_t max_spans_;
  mutable absl::Mutex mu_;
  std::vector<TraceSpan> spans_ ABSL_GUARDED_BY(mu_);
  int64_t dropped_ ABSL_GUARDED_BY(mu_) = 0;
};

// Who recorded the spans: the trace's process is the rank.
struct TraceProcess {
  int rank = 0;
  std::string job_id;
  std::string host;
  int64_t dropped_spans = 0;
  int64_t first_step = 0;  // The window: steps first_step .. first_step + steps - 1.
  int64_t steps = 0;
  bool partial = false;  // Training ended before the window did.
};

// The spans of each process as one Chrome trace: {"traceEvents": [...], "displayTimeUnit":
// "ms", "otherData": {"job_id", "dropped_spans" (summed), "windows": [{"rank",
// "first_step", "steps", "partial"}, ...]}}. Each span is a complete event (ph "X") with ts and dur
// in microseconds since the Unix epoch, pid = rank, tid = thread, cat, name and args; each process
// gets process_name / process_sort_index metadata events (ph "M") and its threads thread_name ones
// ("training", "collectives", else "thread N"). Strings are JSON-escaped (control characters as
// \u00XX; bytes that are not UTF-8 are replaced by U+FFFD), so the output is valid JSON for any
// input.
std::string ChromeTraceJson(
    const std::vector<std::pair<TraceProcess, std::vector<TraceSpan>>>& processes);

// `s` as a JSON string literal (with the quotes), per ChromeTraceJson's escaping rules.
std::string JsonString(const std::string& s);

}  // namespace baton::trainer
