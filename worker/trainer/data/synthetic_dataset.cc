// The synthetic dataset: samples computed on demand from (seed, split, index).

#include <ATen/ops/empty.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "common/status_macros.h"
#include "worker/trainer/data/datasets_internal.h"
#include "worker/trainer/data/formats/random.h"

namespace baton::trainer::internal {
namespace {

constexpr int kWaves = 3;                   // Plane waves per class prototype.
constexpr int64_t kMaxTokenAlphabet = 256;  // Tokens are drawn from min(vocab, 256) ids.
constexpr int64_t kMaxStride = 15;
constexpr uint64_t kClassStream = 0xc1a55;
constexpr uint64_t kLabelStream = 1;
constexpr uint64_t kNoiseStream = 2;

// A class's prototype image: a sum of plane waves
//   sum_w amplitude_w * sin(2 pi (fx_w x + fy_w y) / S + phase_w + channel_phase_w[c]),
// smooth and distinct per class; samples add N(0, 1) noise.
struct Prototype {
  struct Wave {
    double fx, fy, phase, amplitude;
    std::array<double, 3> channel_phase;
  };
  std::array<Wave, kWaves> waves;
};

Prototype MakePrototype(uint64_t seed, int64_t label) {
  Prng rng(MixSeed({seed, kClassStream, static_cast<uint64_t>(label)}));
  Prototype p;
  for (Prototype::Wave& w : p.waves) {
    w.fx = static_cast<double>(rng.Below(5));  // 0..4 periods across the image.
    w.fy = static_cast<double>(rng.Below(5));
    w.phase = rng.Uniform(0, 2 * M_PI);
    w.amplitude = rng.Uniform(0.5, 1.0);
    for (double& c : w.channel_phase) c = rng.Uniform(0, 2 * M_PI);
  }
  return p;
}

class SyntheticDataset final : public Dataset {
 public:
  SyntheticDataset(const DataOptions& options, Split split, int64_t size)
      : seed_(options.seed), stream_(split == Split::kTrain ? 0 : 1), size_(size) {
    info_.name = "synthetic";
    if (options.synthetic_tokens) {
      info_.language_model = true;
      info_.input_shape = {options.context_length};
      info_.vocab_size = options.vocab_size;
      alphabet_ = std::min(options.vocab_size, kMaxTokenAlphabet);
    } else {
      info_.num_classes = options.num_classes;
      info_.input_shape = {3, options.image_size, options.image_size};
      for (int64_t k = 0; k < options.num_classes; ++k) {
        prototypes_.push_back(MakePrototype(seed_, k));
      }
    }
  }

  int64_t size() const override { return size_; }
  const DatasetInfo& info() const override { return info_; }

  absl::StatusOr<Batch> Get(absl::Span<const int64_t> indices, uint64_t) const override {
    RETURN_IF_ERROR(CheckIndices(indices, size_, "synthetic"));
    return info_.language_model ? GetTokens(indices) : GetImages(indices);
  }

 private:
  uint64_t SampleSeed(int64_t index, uint64_t what) const {
    return MixSeed({seed_, stream_, static_cast<uint64_t>(index), what});
  }

  Batch GetImages(absl::Span<const int64_t> indices) const {
    const auto b = static_cast<int64_t>(indices.size());
    const int64_t s = info_.input_shape[1];
    Batch batch{at::empty({b, 3, s, s}, at::kFloat), at::empty({b}, at::kLong)};
    float* out = batch.input.data_ptr<float>();
    int64_t* labels = batch.target.data_ptr<int64_t>();
    // sin(a + b) = sin a cos b + cos a sin b with a from x and b from y: per-axis tables.
    std::vector<double> sx(s), cx(s), sy(s), cy(s);
    for (int64_t j = 0; j < b; ++j) {
      Prng label_rng(SampleSeed(indices[j], kLabelStream));
      const auto label = static_cast<int64_t>(label_rng.Below(prototypes_.size()));
      labels[j] = label;
      const Prototype& proto = prototypes_[label];
      Prng noise(SampleSeed(indices[j], kNoiseStream));
      float* sample = out + j * 3 * s * s;
      std::fill(sample, sample + 3 * s * s, 0.0f);
      for (const Prototype::Wave& w : proto.waves) {
        for (int c = 0; c < 3; ++c) {
          for (int64_t x = 0; x < s; ++x) {
            const double a = 2 * M_PI * w.fx * x / s + w.phase + w.channel_phase[c];
            sx[x] = std::sin(a);
            cx[x] = std::cos(a);
          }
          for (int64_t y = 0; y < s; ++y) {
            const double a = 2 * M_PI * w.fy * y / s;
            sy[y] = std::sin(a);
            cy[y] = std::cos(a);
          }
          float* plane = sample + c * s * s;
          for (int64_t y = 0; y < s; ++y) {
            for (int64_t x = 0; x < s; ++x) {
              plane[y * s + x] += static_cast<float>(w.amplitude * (sx[x] * cy[y] + cx[x] * sy[y]));
            }
          }
        }
      }
      for (int64_t k = 0; k < 3 * s * s; ++k) sample[k] += static_cast<float>(noise.Normal());
    }
    return batch;
  }

  Batch GetTokens(absl::Span<const int64_t> indices) const {
    const auto b = static_cast<int64_t>(indices.size());
    const int64_t t = info_.input_shape[0];
    Batch batch{at::empty({b, t}, at::kLong), at::empty({b, t}, at::kLong)};
    int64_t* input = batch.input.data_ptr<int64_t>();
    int64_t* target = batch.target.data_ptr<int64_t>();
    for (int64_t j = 0; j < b; ++j) {
      // (start + k * stride) mod alphabet: after two tokens the rest is predictable.
      Prng rng(SampleSeed(indices[j], kLabelStream));
      const auto start = static_cast<int64_t>(rng.Below(alphabet_));
      const int64_t stride = 1 + static_cast<int64_t>(rng.Below(
                                     std::max<int64_t>(1, std::min(alphabet_ - 1, kMaxStride))));
      for (int64_t k = 0; k < t; ++k) {
        input[j * t + k] = (start + k * stride) % alphabet_;
        target[j * t + k] = (start + (k + 1) * stride) % alphabet_;
      }
    }
    return batch;
  }

  const uint64_t seed_;
  const uint64_t stream_;  // 0 train, 1 test.
  const int64_t size_;
  int64_t alphabet_ = 0;               // Tokens only.
  std::vector<Prototype> prototypes_;  // Images only: one per class.
  DatasetInfo info_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> OpenSynthetic(const DataOptions& options, Split split) {
  const int64_t size = split == Split::kTrain ? options.synthetic_samples
                                              : std::max<int64_t>(1, options.synthetic_samples / 8);
  return std::make_unique<SyntheticDataset>(options, split, size);
}

}  // namespace baton::trainer::internal
