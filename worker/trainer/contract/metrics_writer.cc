#include "worker/trainer/contract/metrics_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace baton::trainer {
namespace {

void AppendJsonString(const std::string& s, std::string* out) {
  out->push_back('"');
  for (const char c : s) {
    switch (c) {
      case '"':
        out->append("\\\"");
        break;
      case '\\':
        out->append("\\\\");
        break;
      case '\n':
        out->append("\\n");
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          absl::StrAppendFormat(out, "\\u%04x", static_cast<int>(c));
        } else {
          out->push_back(c);
        }
    }
  }
  out->push_back('"');
}

}  // namespace

std::string FormatMetricsLine(const MetricFields& fields) {
  std::string line = "{";
  bool first = true;
  for (const auto& [key, value] : fields) {
    if (!std::isfinite(value)) continue;
    if (!first) line.push_back(',');
    first = false;
    AppendJsonString(key, &line);
    line.push_back(':');
    if (std::trunc(value) == value && std::fabs(value) < 0x1.0p53) {
      absl::StrAppend(&line, static_cast<int64_t>(value));
    } else {
      absl::StrAppendFormat(&line, "%.9g", value);
    }
  }
  line.append("}\n");
  return line;
}

absl::StatusOr<MetricsWriter> MetricsWriter::ForFd(int fd) {
  if (fd >= 0 && ::fcntl(fd, F_GETFD) < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics fd ", fd, " is not an open file descriptor"));
  }
  return MetricsWriter(fd);
}

absl::Status MetricsWriter::Write(const MetricFields& fields) {
  if (fd_ < 0) return absl::OkStatus();
  const std::string line = FormatMetricsLine(fields);
  size_t done = 0;
  while (done < line.size()) {
    const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(
          absl::StrCat("writing metrics to fd ", fd_, ": ", std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace baton::trainer
