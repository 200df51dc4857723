#include "common/logging.h"

#include <unistd.h>

#include <cstring>

#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace baton {

LogMessage::LogMessage(LogLevel level, const char* file, int line) {
  const char* tag = level == LogLevel::kInfo ? "I" : level == LogLevel::kWarning ? "W" : "E";
  const char* base = std::strrchr(file, '/');
  stream_ << tag << absl::FormatTime("%m%d %H:%M:%E3S", absl::Now(), absl::UTCTimeZone())
          << " " << (base ? base + 1 : file) << ":" << line << "] ";
}

LogMessage::~LogMessage() {
  stream_ << '\n';
  const std::string s = stream_.str();
  // One write so concurrent lines do not interleave; logging never fails the caller.
  (void)!::write(STDERR_FILENO, s.data(), s.size());
}

}  // namespace baton
