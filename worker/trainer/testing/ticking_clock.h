#pragma once

// A Clock for tests that moves by a fixed tick on every Now() call, so every interval the
// code under test measures between two readings is a whole, positive number of ticks,
// independent of how fast the machine runs. Thread-safe.

#include <cstdio>
#include <cstdlib>
#include <functional>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"

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

  // The trainer measures time, it arms no timers and waits on none: these abort, so a test
  // that starts relying on them finds out at once.
  Timer After(absl::Duration, std::function<void()>) override { Unsupported("After"); }
  Timer Every(absl::Duration, std::function<void()>) override { Unsupported("Every"); }
  bool AwaitWithDeadline(absl::Mutex*, const absl::Condition&, absl::Time) override {
    Unsupported("AwaitWithDeadline");
  }

 private:
  [[noreturn]] static void Unsupported(const char* what) {
    std::fprintf(stderr, "TickingClock::%s: this test clock has no timers or waits\n", what);
    std::abort();
  }

  const absl::Duration tick_;
  mutable absl::Mutex mu_;
  mutable absl::Time now_ ABSL_GUARDED_BY(mu_);
};

}  // namespace baton::trainer::testing
