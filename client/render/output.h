#pragma once

// Plain building blocks for the CLI's output: an aligned text table, value formatters
// (states, durations, ages, timestamps) and protobuf JSON. Pure functions of their
// inputs: the current time and time zone are always passed in.

#include <google/protobuf/message.h>
#include <google/protobuf/timestamp.pb.h>

#include <functional>
#include <string>
#include <vector>

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
  // Passes the cells of `column` (not its header) through `paint` when rendering, e.g. to
  // colour them; widths are measured on the unpainted text.
  void PaintColumn(size_t column, std::function<std::string(const std::string&)> paint) {
    painted_column_ = column;
    paint_ = std::move(paint);
  }
  // Every line ends with '\n'. `indent` is prepended to each line.
  std::string Render(const std::string& indent = "") const;

 private:
  std::vector<std::string> headers_;
  std::vector<std::vector<std::string>> rows_;
  size_t painted_column_ = 0;
  std::function<std::string(const std::string&)> paint_;
};

// `state` (a JobStateName or WorkerStateName) wrapped in ANSI colour escapes when `color`:
// SUCCEEDED and READY green, FAILED and LOST red, CANCELLED, DRAINING and RESTARTING
// yellow, RUNNING cyan, QUEUED and RENDEZVOUS blue. Unchanged when !color or unknown.
std::string ColorState(const std::string& state, bool color);

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
// RFC 3339 in UTC with the fraction of a second when there is one:
// "2024-05-01T12:00:03.25Z", "2024-05-01T12:00:03Z"; "-" if unset.
std::string FormatRfc3339Utc(const google::protobuf::Timestamp& t);
// A metric value: up to 4 significant digits ("0.3412", "2.303", "1234").
// `text` made safe to print on a terminal: control characters (C0 but tab, DEL, and the C1
// range in UTF-8 or as raw bytes) become visible caret or <U+XXXX> notation, so a relayed
// log line cannot move the cursor, retitle the window or inject terminal escapes.
std::string NeutraliseControls(absl::string_view text);
// Every string field of `message`, nested messages, repeated fields and map keys and values
// included, through NeutraliseControls (bytes fields are left alone). What the human
// formats (tables, describe, progress, results) do to job data before they print it:
// names, argv, paths, messages, metric names all come from other users or their ranks.
void NeutraliseStrings(google::protobuf::Message* message);

std::string FormatMetric(double v);
// A fraction in [0, 1] as a percentage with one decimal: 0.9781 -> "97.8%".
std::string FormatPercent(double fraction);

// Proto3 JSON with the .proto's snake_case field names (as in job files) and every
// field, zero values included (`"exit_code": 0` is data). `multiline` pretty-prints with
// one-space indentation; otherwise one line. No trailing newline.
absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message, bool multiline);
// The ToJson document as block YAML, fields in the same order; strings that YAML would
// read as something else (int64 values, which JSON quotes, "true", "") are quoted. Ends
// with a newline.
absl::StatusOr<std::string> ToYaml(const google::protobuf::Message& message);

}  // namespace baton::cli
