#pragma once

// The lease page: how a rank learns, with no word from the worker daemon, until when it may
// run (docs/ARCHITECTURE.md, "Fencing").
//
// The worker keeps one page per daemon (worker/process/lease_fence.h) whose first 8 bytes
// hold, as a native int64 written atomically, the moment its lease runs out in
// CLOCK_BOOTTIME nanoseconds (the clock every process of the host shares, which keeps
// counting while the host is suspended); kNoLease (INT64_MAX) while it holds no lease
// that can run out. Every process it launches inherits the page's fd (a sealed memfd that
// only the worker can write) at BATON_LEASE_FD. The rank's shim kills the rank once the
// deadline passes; a rank that reads the page itself (baton-trainer at every step, the
// Python helper at every report) stops on its own as well. Plain C++, no LibTorch.

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace baton::trainer {

inline constexpr char kEnvLeaseFd[] = "BATON_LEASE_FD";
// The page's value while no lease that can run out is held.
inline constexpr int64_t kNoLease = INT64_MAX;

// CLOCK_BOOTTIME now, in nanoseconds. Async-signal-safe.
int64_t BootTimeNanos();

// A read-only view of a lease page. Thread-safe; movable, not copyable.
class LeasePage {
 public:
  // Maps the page behind `fd` read-only (the fd may be closed afterwards). Errors:
  // INVALID_ARGUMENT if fd is not an open file of at least 8 bytes; INTERNAL if mmap fails.
  static absl::StatusOr<LeasePage> Map(int fd);
  // The page named by BATON_LEASE_FD; nullopt when the variable is unset. Errors: those
  // of Map, and INVALID_ARGUMENT naming the variable for a value that is not an fd number.
  static absl::StatusOr<std::optional<LeasePage>> FromEnvironment();

  LeasePage(LeasePage&& other) noexcept;
  LeasePage& operator=(LeasePage&& other) noexcept;
  LeasePage(const LeasePage&) = delete;
  LeasePage& operator=(const LeasePage&) = delete;
  ~LeasePage();

  // The deadline, CLOCK_BOOTTIME nanoseconds (kNoLease: none).
  int64_t deadline_nanos() const;
  // Whether the deadline has passed at `now_nanos` (default: now).
  bool Expired(int64_t now_nanos) const { return now_nanos >= deadline_nanos(); }
  bool Expired() const { return Expired(BootTimeNanos()); }

 private:
  explicit LeasePage(const int64_t* page) : page_(page) {}
  const int64_t* page_;  // Null once moved from.
};

}  // namespace baton::trainer
