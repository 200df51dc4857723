// Fuzz target: image decoding (image.h: stb_image, JPEG and PNG) and the transforms over
// whatever decodes. Invariants: no crash; a decoded image has width * height * 3 bytes;
// resampling any crop box (centre, random, or out of the image) stays inside its output.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/strings/string_view.h"
#include "tools/fuzz/fuzz_check.h"
#include "worker/trainer/data/formats/image.h"
#include "worker/trainer/data/formats/random.h"

namespace {

constexpr int kOut = 7;  // Output side: small, odd, so boxes are up- and downscaled.

void Transform(const baton::trainer::Image& image, const baton::trainer::CropBox& box,
               bool flip) {
  std::vector<float> out(3 * kOut * kOut);
  baton::trainer::ResampleToChw(image, box, kOut, kOut, flip,
                                baton::trainer::kImageNetNormalization, out.data());
  for (float v : out) FUZZ_CHECK(std::isfinite(v));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace baton::trainer;
  const absl::string_view bytes(reinterpret_cast<const char*>(data), size);
  const auto image = DecodeImage(bytes, "fuzz");
  if (!image.ok()) return 0;
  FUZZ_CHECK(image->width > 0 && image->height > 0);
  FUZZ_CHECK(image->pixels.size() == size_t{3} * image->width * image->height);
  Prng rng(size);
  Transform(*image, CenterCropBox(image->width, image->height, kOut), false);
  Transform(*image, RandomResizedCropBox(image->width, image->height, rng), true);
  Transform(*image, CropBox{-2.5, 1e6, 3.0 * image->width, 0.5}, false);
  return 0;
}
