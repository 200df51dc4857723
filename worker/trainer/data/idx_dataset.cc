#include "worker/trainer/data/idx_dataset.h"

#include <ATen/ATen.h>

#include <cstring>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace baton::trainer {

absl::StatusOr<MnistDataset> MnistDataset::FromRaw(MnistImages images,
                                                   absl::Span<const uint8_t> labels,
                                                   absl::string_view what) {
  const int64_t count = images.count;
  const int64_t dim = int64_t{images.rows} * images.cols;
  if (count == 0 || dim == 0) {
    return absl::DataLossError(absl::StrCat(what, ": empty dataset"));
  }
  if (static_cast<int64_t>(images.pixels.size()) != count * dim) {
    return absl::DataLossError(absl::StrFormat("%s: %d images of %d pixels need %d bytes, got %d",
                                               what, count, dim, count * dim,
                                               images.pixels.size()));
  }
  if (static_cast<int64_t>(labels.size()) != count) {
    return absl::DataLossError(
        absl::StrFormat("%s: %d images but %d labels", what, count, labels.size()));
  }
  for (size_t i = 0; i < labels.size(); ++i) {
    if (labels[i] >= kNumClasses) {
      return absl::DataLossError(
          absl::StrFormat("%s: label %d of sample %d is not in [0, 10)", what, labels[i], i));
    }
  }
  // The tensor owns the pixels' buffer: a dataset's images are tens of MiB, not copied.
  auto* owned = new std::vector<uint8_t>(std::move(images.pixels));
  at::Tensor pixels = at::from_blob(
      owned->data(), {count, dim}, [owned](void*) { delete owned; }, at::kByte);
  at::Tensor targets = at::empty({count}, at::kByte);
  std::memcpy(targets.data_ptr<uint8_t>(), labels.data(), labels.size());
  return MnistDataset(std::move(pixels), targets.to(at::kLong), images.rows, images.cols);
}

absl::StatusOr<MnistDataset> MnistDataset::Load(const std::string& images_path,
                                                const std::string& labels_path) {
  ASSIGN_OR_RETURN(MnistImages images, ReadMnistImages(images_path));
  ASSIGN_OR_RETURN(const std::vector<uint8_t> labels, ReadMnistLabels(labels_path));
  return FromRaw(std::move(images), labels, absl::StrCat(images_path, " + ", labels_path));
}

MnistBatch MnistDataset::GetBatch(absl::Span<const int64_t> indices) const {
  const at::Tensor index = at::from_blob(const_cast<int64_t*>(indices.data()),
                                         {static_cast<int64_t>(indices.size())}, at::kLong);
  MnistBatch batch;
  batch.inputs =
      images_.index_select(0, index).to(at::kFloat).div_(255.0).sub_(kMnistMean).div_(kMnistStd);
  batch.targets = labels_.index_select(0, index);
  return batch;
}

absl::StatusOr<MnistDataset> LoadMnistTrain(const std::string& dir) {
  const std::string prefix = dir + "/";
  return MnistDataset::Load(prefix + kTrainImagesFile, prefix + kTrainLabelsFile);
}

absl::StatusOr<std::optional<MnistDataset>> LoadMnistTest(const std::string& dir) {
  const std::string prefix = dir + "/";
  std::error_code ec;
  const bool has_images = std::filesystem::exists(prefix + kTestImagesFile, ec);
  const bool has_labels = std::filesystem::exists(prefix + kTestLabelsFile, ec);
  if (has_images != has_labels) {
    return absl::FailedPreconditionError(
        absl::StrCat(dir, ": found only one of ", kTestImagesFile, " and ", kTestLabelsFile));
  }
  if (!has_images) return std::optional<MnistDataset>();
  ASSIGN_OR_RETURN(const std::vector<uint32_t> train_dims,
                   ReadMnistImagesDims(prefix + kTrainImagesFile));
  ASSIGN_OR_RETURN(MnistDataset test,
                   MnistDataset::Load(prefix + kTestImagesFile, prefix + kTestLabelsFile));
  const int64_t train_dim = int64_t{train_dims[1]} * train_dims[2];
  if (test.feature_dim() != train_dim) {
    return absl::DataLossError(absl::StrFormat("%s: test images have %d pixels, train %d", dir,
                                               test.feature_dim(), train_dim));
  }
  return std::optional<MnistDataset>(std::move(test));
}

absl::StatusOr<MnistSplits> LoadMnistDir(const std::string& dir) {
  ASSIGN_OR_RETURN(MnistDataset train, LoadMnistTrain(dir));
  ASSIGN_OR_RETURN(std::optional<MnistDataset> test, LoadMnistTest(dir));
  return MnistSplits{std::move(train), std::move(test)};
}

}  // namespace baton::trainer
