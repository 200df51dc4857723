#pragma once

// A learnable stand-in for MNIST (no download is possible where Baton is tested).
//
// Each sample is a 28x28 "seven-segment" digit: the class picks which of seven strokes
// are drawn; every sample then gets its own box size, position (+-2 px), slant, stroke
// width, ink intensity and endpoint jitter, each stroke is dropped with a small
// probability (which makes a few samples genuinely ambiguous), and Gaussian pixel noise
// is added. An MLP reaches >90% accuracy within a few hundred SGD steps, but a freshly
// initialised one is at chance. Output is a pure function of (count, seed): the generator
// uses its own PRNG and arithmetic, not <random>'s implementation-defined distributions.
// Plain C++; thread-compatible.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker/trainer/data/formats/idx.h"

namespace baton::trainer {

inline constexpr uint32_t kMnistSide = 28;
inline constexpr int kMnistClasses = 10;

struct SyntheticSplit {
  MnistImages images;           // count x 28 x 28.
  std::vector<uint8_t> labels;  // count labels in 0..9, uniformly distributed.
};

// Generates `count` samples from `seed`.
SyntheticSplit GenerateSyntheticMnist(uint32_t count, uint64_t seed);

// Writes train-{images-idx3,labels-idx1}-ubyte and t10k-{images-idx3,labels-idx1}-ubyte
// into `dir` (created if missing). Train and test samples come from different streams of
// the same seed. INTERNAL on I/O errors.
absl::Status WriteSyntheticMnistDir(const std::string& dir, uint32_t train_size, uint32_t test_size,
                                    uint64_t seed);

}  // namespace baton::trainer
