#pragma once

// Writes metric points as JSON lines to a file descriptor (BATON_METRICS_FD; see
// contract.h for the keys the trainer writes). Plain C++.

#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton::trainer {

// Ordered (key, value) pairs of one metric point.
using MetricFields = std::vector<std::pair<std::string, double>>;

// One JSON object on one line, keys in the given order, ending in '\n'. Integral values
// print without a fraction ("step":10), others with up to 9 significant digits.
// Non-finite values are omitted (JSON has no NaN/Infinity). Keys are escaped.
std::string FormatMetricsLine(const MetricFields& fields);

// Not thread-safe: one owner thread. Does not own the descriptor (never closes it).
class MetricsWriter {
 public:
  // A writer that drops every line.
  MetricsWriter() = default;
  // Writes to `fd`; fd < 0 means disabled.
  explicit MetricsWriter(int fd) : fd_(fd) {}

  // A writer for `fd` (from BATON_METRICS_FD; -1 = disabled). INVALID_ARGUMENT if fd >= 0
  // is not an open descriptor.
  static absl::StatusOr<MetricsWriter> ForFd(int fd);

  bool enabled() const { return fd_ >= 0; }

  // Writes one line with a single write(2) when it fits (lines are far below PIPE_BUF, so
  // a pipe reader never sees half a line). UNAVAILABLE if the write fails (e.g. EPIPE when
  // the reader is gone; the caller should ignore SIGPIPE). OK and no-op when disabled.
  absl::Status Write(const MetricFields& fields);

 private:
  int fd_ = -1;
};

}  // namespace baton::trainer
