#pragma once

#include <cstdint>

#include "absl/random/random.h"
#include "absl/time/time.h"

namespace baton::worker {

// Exponential backoff with jitter between reconnect attempts. Not thread-safe: owned by the
// thread that reconnects.
class Backoff {
 public:
  struct Options {
    absl::Duration initial = absl::Milliseconds(100);
    absl::Duration max = absl::Seconds(5);
    double multiplier = 2.0;
    // Each delay is scaled by a uniformly random factor in [1 - jitter, 1], 0 <= jitter <= 1,
    // so that workers cut off together do not reconnect in lockstep.
    double jitter = 0.2;
  };

  explicit Backoff(Options options) : options_(options), next_(options.initial) {}

  // The delay before the next attempt: initial, initial*multiplier, ... capped at max (before
  // jitter).
  absl::Duration Next();
  // After a successful connection: the next delay is `initial` again.
  void Reset() { next_ = options_.initial; }

 private:
  const Options options_;
  absl::Duration next_;
  absl::BitGen rng_;
};

}  // namespace baton::worker
