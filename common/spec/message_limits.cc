#include "common/spec/message_limits.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace baton {
namespace {

absl::Status TooLarge(const std::string& field, int64_t size, int64_t limit, const char* unit) {
  return absl::InvalidArgumentError(
      absl::StrCat(field, ": ", size, " ", unit, " is too large; at most ", limit, " ", unit));
}

}  // namespace

absl::Status CheckMessageLimits(const baton::v1::JobSpec& spec) {
  const int64_t bytes = static_cast<int64_t>(spec.ByteSizeLong());
  if (spec.env_size() > kMaxEnvVars) {
    return TooLarge("env", spec.env_size(), kMaxEnvVars, "variables");
  }
  for (const auto& [name, value] : spec.env()) {
    if (static_cast<int64_t>(name.size()) > kMaxEnvNameBytes) {
      return TooLarge(absl::StrCat("env name \"", name.substr(0, 32), "...\""), name.size(),
                      kMaxEnvNameBytes, "bytes");
    }
    if (static_cast<int64_t>(value.size()) > kMaxEnvValueBytes) {
      return TooLarge(absl::StrCat("env.", name), value.size(), kMaxEnvValueBytes, "bytes");
    }
  }
  if (spec.has_command()) {
    const auto& argv = spec.command().argv();
    if (argv.size() > kMaxArgs) return TooLarge("command.argv", argv.size(), kMaxArgs, "arguments");
    for (int i = 0; i < argv.size(); ++i) {
      if (static_cast<int64_t>(argv[i].size()) > kMaxArgBytes) {
        return TooLarge(absl::StrCat("command.argv[", i, "]"), argv[i].size(), kMaxArgBytes,
                        "bytes");
      }
    }
  }
  if (bytes > kMaxJobSpecBytes) return TooLarge("spec", bytes, kMaxJobSpecBytes, "bytes");
  return absl::OkStatus();
}

absl::Status CheckMessageLimits(const baton::v1::WorkerMessage& msg) {
  if (msg.has_profile_trace() &&
      static_cast<int64_t>(msg.profile_trace().trace_json().size()) > kMaxProfileTraceBytes) {
    return TooLarge("profile_trace.trace_json",
                    static_cast<int64_t>(msg.profile_trace().trace_json().size()),
                    kMaxProfileTraceBytes, "bytes");
  }
  if (msg.has_logs() && msg.logs().lines_size() > kMaxReportEntries) {
    return TooLarge("logs.lines", msg.logs().lines_size(), kMaxReportEntries, "lines");
  }
  if (!msg.has_metrics()) return absl::OkStatus();
  const baton::v1::MetricsReport& m = msg.metrics();
  if (m.points_size() > kMaxReportEntries) {
    return TooLarge("metrics.points", m.points_size(), kMaxReportEntries, "points");
  }
  for (const baton::v1::MetricPoint& p : m.points()) {
    if (p.values_size() > kMaxPointValues) {
      return TooLarge("metrics.points.values", p.values_size(), kMaxPointValues, "values");
    }
    for (const auto& [name, value] : p.values()) {
      if (static_cast<int64_t>(name.size()) > kMaxMetricNameBytes) {
        return TooLarge("metrics.points.values name", static_cast<int64_t>(name.size()),
                        kMaxMetricNameBytes, "bytes");
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace baton
