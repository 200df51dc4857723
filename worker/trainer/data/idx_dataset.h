#pragma once

// An MNIST-format dataset in memory, as LibTorch tensors.
//
// Images stay uint8 ([N, rows*cols]) and are normalised per batch: x/255 scaled to [0, 1],
// then (x - 0.1307) / 0.3081 (MNIST's mean and standard deviation). Immutable after
// construction; const methods are thread-safe.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "worker/trainer/data/formats/idx.h"

namespace baton::trainer {

inline constexpr double kMnistMean = 0.1307;
inline constexpr double kMnistStd = 0.3081;
inline constexpr int64_t kNumClasses = 10;

// File names inside a --data_dir, as in the MNIST distribution.
inline constexpr char kTrainImagesFile[] = "train-images-idx3-ubyte";
inline constexpr char kTrainLabelsFile[] = "train-labels-idx1-ubyte";
inline constexpr char kTestImagesFile[] = "t10k-images-idx3-ubyte";
inline constexpr char kTestLabelsFile[] = "t10k-labels-idx1-ubyte";

struct MnistBatch {
  at::Tensor inputs;   // float32 [B, feature_dim], normalised.
  at::Tensor targets;  // int64 [B], class indices in [0, 10).
};

class MnistDataset {
 public:
  // Validates that counts match, the set is non-empty and labels are < 10; `what` names the
  // source in errors. DATA_LOSS on inconsistent data. The images' pixels become the
  // dataset's (not copied when moved in).
  static absl::StatusOr<MnistDataset> FromRaw(MnistImages images, absl::Span<const uint8_t> labels,
                                              absl::string_view what);

  // Reads an image and a label IDX file (errors as ReadMnistImages/ReadMnistLabels, then
  // FromRaw).
  static absl::StatusOr<MnistDataset> Load(const std::string& images_path,
                                           const std::string& labels_path);

  int64_t size() const { return labels_.size(0); }
  int64_t feature_dim() const { return images_.size(1); }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }

  // The samples at `indices` (each in [0, size()); checked only by LibTorch).
  MnistBatch GetBatch(absl::Span<const int64_t> indices) const;

 private:
  MnistDataset(at::Tensor images, at::Tensor labels, int64_t rows, int64_t cols)
      : images_(std::move(images)), labels_(std::move(labels)), rows_(rows), cols_(cols) {}

  at::Tensor images_;  // uint8 [N, rows*cols].
  at::Tensor labels_;  // int64 [N].
  int64_t rows_;
  int64_t cols_;
};

struct MnistSplits {
  MnistDataset train;
  std::optional<MnistDataset> test;  // Set when both t10k files exist.
};

// Loads <dir>/train-* (required) and <dir>/t10k-* (optional: both or neither; one without
// the other is FAILED_PRECONDITION). Train and test must have the same image size.
absl::StatusOr<MnistSplits> LoadMnistDir(const std::string& dir);

// One split of LoadMnistDir, with its errors, reading only that split's files (and the
// train images' header, for the test split's size check). The train split is required;
// the test split is nullopt where neither t10k file exists.
absl::StatusOr<MnistDataset> LoadMnistTrain(const std::string& dir);
absl::StatusOr<std::optional<MnistDataset>> LoadMnistTest(const std::string& dir);

}  // namespace baton::trainer
