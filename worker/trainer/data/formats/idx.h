#pragma once

// Reading and writing MNIST-format IDX files (the container format of LeCun's MNIST).
//
// Layout of an IDX file (all integers big-endian):
//   u8 0, u8 0, u8 type (0x08 = unsigned byte; the only type Baton supports), u8 ndims,
//   ndims x u32 dimension sizes, then prod(dims) data bytes in row-major order.
// MNIST's "magic numbers" are the first four bytes read as one u32:
//   2051 (0x00000803) for images [count, rows, cols], 2049 (0x00000801) for labels [count].
//
// Plain C++ (no LibTorch) so that //tools:make_mnist builds quickly. There is exactly one
// IDX reader and one writer in Baton: these. Functions are thread-compatible.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {

inline constexpr uint32_t kIdxImagesMagic = 2051;
inline constexpr uint32_t kIdxLabelsMagic = 2049;

// A dense unsigned-byte array as stored in an IDX file.
struct IdxArray {
  std::vector<uint32_t> dims;  // 1..4 sizes; a size may be 0 (no data).
  std::vector<uint8_t> data;   // Row-major; size() == product of dims.
};

// MNIST images: `count` images of rows x cols pixels, 0 = background, 255 = ink.
struct MnistImages {
  uint32_t count = 0;
  uint32_t rows = 0;
  uint32_t cols = 0;
  std::vector<uint8_t> pixels;  // count * rows * cols bytes, image-major then row-major.
};

// Parses an in-memory IDX file. `what` names the source in error messages (e.g. a path).
// Errors: INVALID_ARGUMENT if the header is not an unsigned-byte IDX header,
// DATA_LOSS if the data is shorter or longer than the dimensions say.
absl::StatusOr<IdxArray> ParseIdx(absl::string_view bytes, absl::string_view what);

// Serialises `array` in IDX format. INVALID_ARGUMENT if data.size() != product of dims or
// there are not 1..4 dims.
absl::StatusOr<std::string> SerializeIdx(const IdxArray& array);

// Reads and parses an IDX file. NOT_FOUND if it does not exist, FAILED_PRECONDITION if it
// cannot be read, else as ParseIdx.
absl::StatusOr<IdxArray> ReadIdxFile(const std::string& path);

// Writes `array` to `path` (truncating). INTERNAL on I/O errors.
absl::Status WriteIdxFile(const std::string& path, const IdxArray& array);

// Reads an MNIST image file: magic 2051, 3 dims. INVALID_ARGUMENT on a wrong magic,
// otherwise the errors of ReadIdxFile.
absl::StatusOr<MnistImages> ReadMnistImages(const std::string& path);

// The dims [count, rows, cols] of an MNIST image file, from its header alone (the data is
// not read or checked). Errors as ReadMnistImages for the header.
absl::StatusOr<std::vector<uint32_t>> ReadMnistImagesDims(const std::string& path);

// Reads an MNIST label file: magic 2049, 1 dim. Errors as ReadMnistImages.
absl::StatusOr<std::vector<uint8_t>> ReadMnistLabels(const std::string& path);

// Write files that are byte-compatible with the real MNIST distribution.
absl::Status WriteMnistImages(const std::string& path, const MnistImages& images);
absl::Status WriteMnistLabels(const std::string& path, const std::vector<uint8_t>& labels);

}  // namespace baton::trainer
