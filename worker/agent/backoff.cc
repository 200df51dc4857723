#include "worker/agent/backoff.h"

#include <algorithm>

namespace baton::worker {

absl::Duration Backoff::Next() {
  const absl::Duration base = std::min(next_, options_.max);
  next_ = std::min(base * options_.multiplier, options_.max);
  const double jitter = std::clamp(options_.jitter, 0.0, 1.0);
  if (jitter == 0) return base;
  return base * (1.0 - jitter * absl::Uniform<double>(rng_, 0.0, 1.0));
}

}  // namespace baton::worker
