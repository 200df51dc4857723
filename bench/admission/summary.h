#pragma once

// Min / median / max of a bench's repeated timings.

#include <algorithm>
#include <vector>

namespace baton::bench {

struct Summary {
  double min = 0, median = 0, max = 0;
};

// `samples` must not be empty.
inline Summary Summarise(std::vector<double> samples) {
  std::sort(samples.begin(), samples.end());
  return {samples.front(), samples[samples.size() / 2], samples.back()};
}

}  // namespace baton::bench
