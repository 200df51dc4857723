#include "worker/trainer/data/formats/image.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "worker/trainer/data/formats/file_util.h"

// Declarations only: the definitions are in stb.cc.
#define STBI_NO_STDIO
#define STBI_WRITE_NO_STDIO
#include "worker/trainer/data/formats/stb_image_fixed.h"
#include <stb/stb_image_write.h>

namespace baton::trainer {
namespace {

constexpr int kChannels = 3;
constexpr int kJpegQuality = 95;

void AppendToString(void* context, void* data, int size) {
  static_cast<std::string*>(context)->append(static_cast<const char*>(data), size);
}

// Resampling weights of one output pixel along one axis: input [first, first + size).
struct Taps {
  int first = 0;
  std::vector<float> weights;
};

// PIL's precompute_coeffs for the bilinear (triangle) filter: output pixel i covers
// [start + i * scale, start + (i + 1) * scale) of the input; when downscaling the filter
// is widened by the scale, which antialiases.
std::vector<Taps> ComputeTaps(int in_size, double start, double length, int out_size) {
  const double scale = length / out_size;
  const double filter_scale = std::max(scale, 1.0);
  const double support = 1.0 * filter_scale;
  std::vector<Taps> taps(out_size);
  for (int i = 0; i < out_size; ++i) {
    const double center = start + (i + 0.5) * scale;
    int lo = static_cast<int>(std::floor(center - support + 0.5));
    int hi = static_cast<int>(std::floor(center + support + 0.5));
    lo = std::clamp(lo, 0, in_size - 1);
    hi = std::clamp(hi, lo + 1, in_size);
    Taps& t = taps[i];
    t.first = lo;
    double sum = 0;
    for (int x = lo; x < hi; ++x) {
      const double d = std::abs((x + 0.5 - center) / filter_scale);
      const double w = d < 1.0 ? 1.0 - d : 0.0;
      t.weights.push_back(static_cast<float>(w));
      sum += w;
    }
    if (sum <= 0) {  // Centre outside the image: nearest edge pixel.
      std::fill(t.weights.begin(), t.weights.end(), 0.0f);
      const int nearest = std::clamp(static_cast<int>(std::floor(center)), lo, hi - 1);
      t.weights[nearest - lo] = 1.0f;
    } else {
      for (float& w : t.weights) w = static_cast<float>(w / sum);
    }
  }
  return taps;
}

CropBox ClampBox(const CropBox& box, int width, int height) {
  CropBox b = box;
  b.width = std::clamp(b.width, 1e-6, static_cast<double>(width));
  b.height = std::clamp(b.height, 1e-6, static_cast<double>(height));
  b.x = std::clamp(b.x, 0.0, width - b.width);
  b.y = std::clamp(b.y, 0.0, height - b.height);
  return b;
}

}  // namespace

absl::StatusOr<Image> DecodeImage(absl::string_view bytes, absl::string_view what) {
  int width = 0;
  int height = 0;
  int channels_in_file = 0;
  // The header's size first: a few bytes can claim a picture that needs gigabytes.
  if (stbi_info_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                            static_cast<int>(bytes.size()), &width, &height,
                            &channels_in_file) != 0 &&
      int64_t{width} * height > kMaxImagePixels) {
    return absl::DataLossError(absl::StrCat(what, ": image of ", width, "x", height,
                                            " pixels is larger than the ", kMaxImagePixels,
                                            " pixels a training image may have"));
  }
  stbi_uc* data = stbi_load_from_memory(reinterpret_cast<const stbi_uc*>(bytes.data()),
                                        static_cast<int>(bytes.size()), &width, &height,
                                        &channels_in_file, kChannels);
  if (data == nullptr) {
    return absl::DataLossError(
        absl::StrCat(what, ": cannot decode image (JPEG/PNG): ", stbi_failure_reason()));
  }
  Image image;
  image.width = width;
  image.height = height;
  image.pixels.assign(data, data + size_t{static_cast<size_t>(width)} * height * kChannels);
  stbi_image_free(data);
  return image;
}

absl::StatusOr<Image> ReadImageFile(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string bytes, ReadWholeFile(path));
  return DecodeImage(bytes, path);
}

absl::Status WriteImageFile(const std::string& path, const Image& image) {
  if (image.width <= 0 || image.height <= 0 ||
      image.pixels.size() != size_t{static_cast<size_t>(image.width)} * image.height * kChannels) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: image %dx%d needs %d RGB bytes, has %d", path, image.width,
                        image.height, image.width * image.height * kChannels, image.pixels.size()));
  }
  const std::string ext = absl::AsciiStrToLower(std::filesystem::path(path).extension().string());
  std::string bytes;
  int ok = 0;
  if (ext == ".png") {
    ok = stbi_write_png_to_func(AppendToString, &bytes, image.width, image.height, kChannels,
                                image.pixels.data(), image.width * kChannels);
  } else if (ext == ".jpg" || ext == ".jpeg") {
    ok = stbi_write_jpg_to_func(AppendToString, &bytes, image.width, image.height, kChannels,
                                image.pixels.data(), kJpegQuality);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": unsupported image extension (use .png, .jpg or .jpeg)"));
  }
  if (!ok) return absl::InternalError(absl::StrCat(path, ": image encoding failed"));
  return WriteWholeFile(path, bytes);
}

CropBox RandomResizedCropBox(int width, int height, Prng& rng, double min_scale, double max_scale,
                             double min_ratio, double max_ratio) {
  const double area = static_cast<double>(width) * height;
  const double log_min = std::log(min_ratio);
  const double log_max = std::log(max_ratio);
  for (int attempt = 0; attempt < 10; ++attempt) {
    const double target_area = area * rng.Uniform(min_scale, max_scale);
    const double aspect = std::exp(rng.Uniform(log_min, log_max));
    const auto w = static_cast<int>(std::lround(std::sqrt(target_area * aspect)));
    const auto h = static_cast<int>(std::lround(std::sqrt(target_area / aspect)));
    if (w > 0 && h > 0 && w <= width && h <= height) {
      const auto top = static_cast<double>(rng.Below(static_cast<uint64_t>(height - h + 1)));
      const auto left = static_cast<double>(rng.Below(static_cast<uint64_t>(width - w + 1)));
      return CropBox{left, top, static_cast<double>(w), static_cast<double>(h)};
    }
  }
  // Fallback: the whole image, cropped centrally to the nearest allowed aspect ratio.
  const double in_ratio = static_cast<double>(width) / height;
  double w = width;
  double h = height;
  if (in_ratio < min_ratio) {
    h = std::lround(w / min_ratio);
  } else if (in_ratio > max_ratio) {
    w = std::lround(h * max_ratio);
  }
  return CropBox{std::floor((width - w) / 2), std::floor((height - h) / 2), w, h};
}

CropBox CenterCropBox(int width, int height, int size) {
  const double resized_short = std::lround(size * 256.0 / 224.0);
  const double side =
      std::min<double>(size * std::min(width, height) / resized_short, std::min(width, height));
  return CropBox{(width - side) / 2, (height - side) / 2, side, side};
}

void ResampleToChw(const Image& src, const CropBox& box_in, int out_width, int out_height,
                   bool flip, const Normalization& norm, float* out) {
  const CropBox box = ClampBox(box_in, src.width, src.height);
  const std::vector<Taps> xs = ComputeTaps(src.width, box.x, box.width, out_width);
  const std::vector<Taps> ys = ComputeTaps(src.height, box.y, box.height, out_height);
  // Rows of the source the vertical pass reads.
  int row_lo = src.height;
  int row_hi = 0;
  for (const Taps& t : ys) {
    row_lo = std::min(row_lo, t.first);
    row_hi = std::max(row_hi, t.first + static_cast<int>(t.weights.size()));
  }
  // Horizontal pass: rows [row_lo, row_hi) -> tmp[row][out_x][c], on the 0..255 scale.
  const int rows = row_hi - row_lo;
  std::vector<float> tmp(static_cast<size_t>(rows) * out_width * kChannels);
  for (int r = 0; r < rows; ++r) {
    const uint8_t* in_row =
        src.pixels.data() + static_cast<size_t>(row_lo + r) * src.width * kChannels;
    float* tmp_row = tmp.data() + static_cast<size_t>(r) * out_width * kChannels;
    for (int ox = 0; ox < out_width; ++ox) {
      const Taps& t = xs[ox];
      float acc[kChannels] = {0, 0, 0};
      for (size_t k = 0; k < t.weights.size(); ++k) {
        const uint8_t* p = in_row + static_cast<size_t>(t.first + k) * kChannels;
        for (int c = 0; c < kChannels; ++c) acc[c] += t.weights[k] * p[c];
      }
      for (int c = 0; c < kChannels; ++c) tmp_row[ox * kChannels + c] = acc[c];
    }
  }
  // Vertical pass + flip + normalisation -> CHW.
  float scale[kChannels];
  float shift[kChannels];
  for (int c = 0; c < kChannels; ++c) {
    scale[c] = 1.0f / (255.0f * norm.std[c]);
    shift[c] = -norm.mean[c] / norm.std[c];
  }
  const size_t plane = static_cast<size_t>(out_width) * out_height;
  for (int oy = 0; oy < out_height; ++oy) {
    const Taps& t = ys[oy];
    for (int ox = 0; ox < out_width; ++ox) {
      float acc[kChannels] = {0, 0, 0};
      for (size_t k = 0; k < t.weights.size(); ++k) {
        const float* p =
            tmp.data() + (static_cast<size_t>(t.first - row_lo + k) * out_width + ox) * kChannels;
        for (int c = 0; c < kChannels; ++c) acc[c] += t.weights[k] * p[c];
      }
      const int x = flip ? out_width - 1 - ox : ox;
      for (int c = 0; c < kChannels; ++c) {
        out[c * plane + static_cast<size_t>(oy) * out_width + x] = acc[c] * scale[c] + shift[c];
      }
    }
  }
}

}  // namespace baton::trainer
