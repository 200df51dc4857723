#include "worker/trainer/data/synthetic_mnist.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/trainer/data/formats/random.h"

namespace baton::trainer {
namespace {

// Segments a..g of a seven-segment display, endpoints in a unit box (x right, y down).
struct Segment {
  double x0, y0, x1, y1;
};
constexpr std::array<Segment, 7> kSegments = {{
    {0, 0, 1, 0},      // a: top
    {1, 0, 1, 0.5},    // b: top right
    {1, 0.5, 1, 1},    // c: bottom right
    {0, 1, 1, 1},      // d: bottom
    {0, 0.5, 0, 1},    // e: bottom left
    {0, 0, 0, 0.5},    // f: top left
    {0, 0.5, 1, 0.5},  // g: middle
}};
// Bit i set = segment i drawn. "1" is drawn as a centred vertical bar (see below).
constexpr std::array<uint8_t, kMnistClasses> kDigitSegments = {
    0b0111111,  // 0: abcdef
    0b0000110,  // 1: bc
    0b1011011,  // 2: abdeg
    0b1001111,  // 3: abcdg
    0b1100110,  // 4: bcfg
    0b1101101,  // 5: acdfg
    0b1111101,  // 6: acdefg
    0b0000111,  // 7: abc
    0b1111111,  // 8: all
    0b1101111,  // 9: abcdfg
};

constexpr double kSegmentDropProbability = 0.04;
constexpr double kNoiseStddev = 24.0;  // In pixel units (0..255).

double DistanceToSegment(double px, double py, double x0, double y0, double x1, double y1) {
  const double dx = x1 - x0;
  const double dy = y1 - y0;
  const double len2 = dx * dx + dy * dy;
  double t = len2 > 0 ? ((px - x0) * dx + (py - y0) * dy) / len2 : 0.0;
  t = std::clamp(t, 0.0, 1.0);
  const double cx = x0 + t * dx - px;
  const double cy = y0 + t * dy - py;
  return std::sqrt(cx * cx + cy * cy);
}

void RenderDigit(int digit, Prng& rng, uint8_t* out) {
  const double width = rng.Uniform(8.0, 13.0);
  const double height = rng.Uniform(14.0, 19.0);
  const double cx = 14.0 + rng.Uniform(-2.0, 2.0);
  const double cy = 14.0 + rng.Uniform(-2.0, 2.0);
  const double slant = rng.Uniform(-0.25, 0.25);  // x shift per unit of y above centre.
  const double thickness = rng.Uniform(1.3, 2.6);
  const double ink = rng.Uniform(0.75, 1.0);

  // Strokes in pixel coordinates after box scaling, slant and per-endpoint jitter.
  std::vector<Segment> strokes;
  for (int s = 0; s < 7; ++s) {
    if (((kDigitSegments[digit] >> s) & 1) == 0) continue;
    if (rng.Uniform() < kSegmentDropProbability) continue;
    Segment seg = kSegments[s];
    if (digit == 1) seg.x0 = seg.x1 = 0.5;
    auto place = [&](double ux, double uy, double* x, double* y) {
      const double ly = (uy - 0.5) * height;
      *x = cx + (ux - 0.5) * width - slant * ly + rng.Uniform(-0.7, 0.7);
      *y = cy + ly + rng.Uniform(-0.7, 0.7);
    };
    Segment placed{};
    place(seg.x0, seg.y0, &placed.x0, &placed.y0);
    place(seg.x1, seg.y1, &placed.x1, &placed.y1);
    strokes.push_back(placed);
  }

  for (uint32_t r = 0; r < kMnistSide; ++r) {
    for (uint32_t c = 0; c < kMnistSide; ++c) {
      const double px = c + 0.5;
      const double py = r + 0.5;
      double value = 0.0;  // Anti-aliased coverage in [0, 1].
      for (const Segment& s : strokes) {
        const double d = DistanceToSegment(px, py, s.x0, s.y0, s.x1, s.y1);
        value = std::max(value, std::clamp(thickness / 2 + 0.5 - d, 0.0, 1.0));
      }
      const double pixel = 255.0 * ink * value + kNoiseStddev * rng.Normal();
      out[r * kMnistSide + c] = static_cast<uint8_t>(std::clamp(std::lround(pixel), 0L, 255L));
    }
  }
}

}  // namespace

SyntheticSplit GenerateSyntheticMnist(uint32_t count, uint64_t seed) {
  Prng rng(seed * 0x2545f4914f6cdd1dULL + 0x1234567ULL);
  SyntheticSplit split;
  split.images.count = count;
  split.images.rows = kMnistSide;
  split.images.cols = kMnistSide;
  split.images.pixels.resize(size_t{count} * kMnistSide * kMnistSide);
  split.labels.resize(count);
  for (uint32_t i = 0; i < count; ++i) {
    const int digit = static_cast<int>(rng.Below(kMnistClasses));
    split.labels[i] = static_cast<uint8_t>(digit);
    RenderDigit(digit, rng, split.images.pixels.data() + size_t{i} * kMnistSide * kMnistSide);
  }
  return split;
}

absl::Status WriteSyntheticMnistDir(const std::string& dir, uint32_t train_size, uint32_t test_size,
                                    uint64_t seed) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": cannot create: ", ec.message()));
  const SyntheticSplit train = GenerateSyntheticMnist(train_size, 2 * seed);
  const SyntheticSplit test = GenerateSyntheticMnist(test_size, 2 * seed + 1);
  RETURN_IF_ERROR(WriteMnistImages(dir + "/train-images-idx3-ubyte", train.images));
  RETURN_IF_ERROR(WriteMnistLabels(dir + "/train-labels-idx1-ubyte", train.labels));
  RETURN_IF_ERROR(WriteMnistImages(dir + "/t10k-images-idx3-ubyte", test.images));
  RETURN_IF_ERROR(WriteMnistLabels(dir + "/t10k-labels-idx1-ubyte", test.labels));
  return absl::OkStatus();
}

}  // namespace baton::trainer
