#pragma once

// A Clock for tests that moves by a fixed tick on every Now() call, so every interval the
// code under test measures between two readings is a whole, positive number of ticks,
// independent of how fast the machine runs. Thread-safe.

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace baton::trainer::testing {

class TickingClock final : public Clock {
 public:
  explicit TickingClock(absl::Duration tick, absl::Time start = absl::UnixEpoch())
      : tick_(tick), now_(start) {}

  // The time after one more tick.
  absl::Time Now() const override {
    absl::MutexLock lock(&mu_);
    now_ += tick_;
    return now_;
  }

  absl::Duration tick() const { return tick_; }

 private:
  const absl::Duration tick_;
  mutable absl::Mutex mu_;
  mutable absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::trainer::testing
