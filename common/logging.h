#pragma once

#include <sstream>
#include <string>

// Minimal leveled logging to stderr: `BATON_LOG(INFO) << "worker " << id << " lost";`
// One line per statement, prefixed with UTC time, level and source location. Thread-safe
// (each line is written with a single write(2)).

namespace baton {

enum class LogLevel { kInfo, kWarning, kError };

class LogMessage {
 public:
  LogMessage(LogLevel level, const char* file, int line);
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  std::ostringstream stream_;
};

}  // namespace baton

#define BATON_LOG_LEVEL_INFO ::baton::LogLevel::kInfo
#define BATON_LOG_LEVEL_WARNING ::baton::LogLevel::kWarning
#define BATON_LOG_LEVEL_ERROR ::baton::LogLevel::kError
#define BATON_LOG(level) \
  ::baton::LogMessage(BATON_LOG_LEVEL_##level, __FILE__, __LINE__).stream()
