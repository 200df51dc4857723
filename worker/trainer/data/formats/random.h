#pragma once

// Small, platform-independent pseudo-randomness for data generation and augmentation.
//
// SplitMix64 with our own arithmetic (not <random>'s implementation-defined
// distributions), so the same seed gives the same numbers with every compiler and
// standard library. Header-only, no LibTorch. Prng is thread-compatible; MixSeed is pure.

#include <cmath>
#include <cstdint>
#include <initializer_list>

namespace baton::trainer {

// One SplitMix64 step: advances `state` and returns a well-mixed 64-bit value.
inline uint64_t SplitMix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// A seed derived from several values (e.g. seed, epoch, batch, sample): order matters.
inline uint64_t MixSeed(std::initializer_list<uint64_t> values) {
  uint64_t state = 0x6a09e667f3bcc908ULL;
  uint64_t out = 0;
  for (uint64_t v : values) {
    state ^= v;
    out = SplitMix64(state);
    state = out;
  }
  return out;
}

class Prng {
 public:
  explicit Prng(uint64_t seed) : state_(seed) {}

  uint64_t Next() { return SplitMix64(state_); }
  // Uniform in [0, 1).
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // Uniform in [lo, hi).
  double Uniform(double lo, double hi) { return lo + (hi - lo) * Uniform(); }
  // Uniform integer in [0, n); n > 0.
  uint64_t Below(uint64_t n) {
    const auto k = static_cast<uint64_t>(Uniform() * static_cast<double>(n));
    return k < n ? k : n - 1;  // Rounding can reach n for huge n.
  }
  // Standard normal (Box-Muller).
  double Normal() {
    const double u1 = 1.0 - Uniform();  // (0, 1]
    const double u2 = Uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
  }

 private:
  uint64_t state_;
};

}  // namespace baton::trainer
