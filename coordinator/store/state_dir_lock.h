#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace baton::coordinator {

// Exclusive ownership of a coordinator state directory, so that two coordinators never
// write one store: an OS advisory lock (flock) on `<dir>/LOCK`, which records the holder's
// pid. The kernel releases it when the holder exits, however it exits (SIGKILL included),
// so a restarted coordinator never finds a stale lock.
class StateDirLock {
 public:
  // Takes the lock on `dir` (which must exist) without waiting. FAILED_PRECONDITION when
  // another process holds it, naming that process's pid: "state directory D is in use by
  // another baton-coordinator (pid N)". UNAVAILABLE if the lock file cannot be opened.
  static absl::StatusOr<std::unique_ptr<StateDirLock>> Acquire(const std::string& dir);

  // Releases the lock.
  ~StateDirLock();
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

 private:
  explicit StateDirLock(int fd) : fd_(fd) {}
  const int fd_;
};

}  // namespace baton::coordinator
