#pragma once

// RGB images for image-folder datasets: decoding (stb_image: JPEG and PNG), encoding (for
// test data) and the torchvision-style transforms that turn an image into a normalised
// float CHW sample.
//
// A transform is a crop box in source pixels resampled to the output size, optionally
// mirrored, then normalised: out[c][y][x] = (v / 255 - mean[c]) / std[c]. Resampling is
// separable and antialiased like PIL's BILINEAR (a triangle filter widened by the
// downscale factor), which is what torchvision applies to PIL images.
//
// Plain C++ (no LibTorch). Functions are thread-safe (stb's failure reason is
// thread-local).

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/trainer/data/formats/random.h"

namespace baton::trainer {

// 8-bit RGB, row-major, channels interleaved (HWC).
struct Image {
  int width = 0;
  int height = 0;
  std::vector<uint8_t> pixels;  // width * height * 3 bytes.
};

// A region of a source image, in pixels (fractional for resizes).
struct CropBox {
  double x = 0;  // Left.
  double y = 0;  // Top.
  double width = 0;
  double height = 0;
};

struct Normalization {
  std::array<float, 3> mean;  // Per channel, on the [0, 1] scale.
  std::array<float, 3> std;
};
inline constexpr Normalization kImageNetNormalization = {{0.485f, 0.456f, 0.406f},
                                                         {0.229f, 0.224f, 0.225f}};

// The most pixels a decoded image may have (64 Mi: 192 MiB as RGB), checked from the file's
// header before anything is allocated.
inline constexpr int64_t kMaxImagePixels = int64_t{1} << 26;

// Decodes a JPEG or PNG file held in memory, converting any channel layout to RGB.
// `what` names the source in errors. DATA_LOSS with stb's reason on failure, or naming the
// size of an image over kMaxImagePixels.
absl::StatusOr<Image> DecodeImage(absl::string_view bytes, absl::string_view what);

// Reads and decodes `path`: errors of ReadWholeFile, then of DecodeImage.
absl::StatusOr<Image> ReadImageFile(const std::string& path);

// Encodes `image` by the extension of `path`: ".png" (lossless) or ".jpg"/".jpeg"
// (quality 95), creating parent directories. INVALID_ARGUMENT for another extension or an
// inconsistent image, INTERNAL on I/O errors.
absl::Status WriteImageFile(const std::string& path, const Image& image);

// torchvision's RandomResizedCrop box: up to 10 tries of an area fraction in
// [min_scale, max_scale] and a log-uniform aspect ratio in [min_ratio, max_ratio] with a
// top-left corner uniform over the positions that fit (integer pixels); if none fits, the
// centre crop with the aspect ratio clamped to the range.
CropBox RandomResizedCropBox(int width, int height, Prng& rng, double min_scale = 0.08,
                             double max_scale = 1.0, double min_ratio = 3.0 / 4.0,
                             double max_ratio = 4.0 / 3.0);

// The region torchvision's Resize(round(size * 256 / 224)) + CenterCrop(size) keeps: a
// centred square whose side is size * min(width, height) / round(size * 256 / 224) (clamped
// to the image).
CropBox CenterCropBox(int width, int height, int size);

// Resamples `box` of `src` to out_width x out_height, mirrors it horizontally when `flip`,
// normalises, and writes float CHW planes to `out` (3 * out_height * out_width floats).
// The box is clamped to the image.
void ResampleToChw(const Image& src, const CropBox& box, int out_width, int out_height, bool flip,
                   const Normalization& norm, float* out);

}  // namespace baton::trainer
