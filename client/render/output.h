#pragma once

// Plain building blocks for the CLI's output: an aligned text table, value formatters
// (states, durations, ages, timestamps) and protobuf JSON. Pure functions of their
// inputs: the current time and time zone are always passed in.

#include <string>
#include <vector>

#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"

namespace baton::cli {

// Columns separated by three spaces, each as wide as its widest cell; the last column is
// not padded. Rows with fewer cells than headers are padded with empty cells.
//   ID        NAME   STATE
//   j-000001  mnist  RUNNING
class Table {
 public:
  explicit Table(std::vector<std::string> headers) : headers_(std::move(headers)) {}
  void AddRow(std::vector<std::string> cells) { rows_.push_back(std::move(cells)); }
  // Every line ends with '\n'. `indent` is prepended to each line.
  std::string Render(const std::string& indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
};

// "RUNNING" for JOB_STATE_RUNNING; "-" for UNSPECIFIED.
std::string JobStateName(baton::v1::JobState state);
// "READY" / "LOST"; "-" for UNSPECIFIED.
std::string WorkerStateName(baton::v1::WorkerState state);
bool IsTerminal(baton::v1::JobState state);

// Compact duration: "0.8s", "45s", "3m05s", "1h02m", "2d03h". Negative is clamped to 0.
std::string HumanDuration(absl::Duration d);
// Age of an event at `t` seen at `now`, kubectl style: "45s", "12m", "5h", "3d";
// "-" if `t` is unset (the epoch).
std::string FormatAge(const google::protobuf::Timestamp& t, absl::Time now);
// "2024-05-01 12:00:03" in `tz`; "-" if unset.
std::string FormatTimestamp(const google::protobuf::Timestamp& t, absl::TimeZone tz);
// A metric value: up to 4 significant digits ("0.3412", "2.303", "1234").
// `text` made safe to print on a terminal: control characters (C0 but tab, DEL, and the C1
// range in UTF-8 or as raw bytes) become visible caret or <U+XXXX> notation, so a relayed
// log line cannot move the cursor, retitle the window or inject terminal escapes.
std::string NeutraliseControls(absl::string_view text);

std::string FormatMetric(double v);
// A fraction in [0, 1] as a percentage with one decimal: 0.9781 -> "97.8%".
std::string FormatPercent(double fraction);

// Canonical proto3 JSON (lowerCamelCase names). `multiline` pretty-prints with
// two-space indentation; otherwise one line. No trailing newline.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message, bool multiline);

}  // namespace baton::cli
