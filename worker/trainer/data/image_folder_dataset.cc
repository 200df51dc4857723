// The image-folder dataset: files listed when opened, decoded and transformed by Get().

#include <ATen/ops/empty.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/trainer/data/datasets_internal.h"
#include "worker/trainer/data/formats/image.h"
#include "worker/trainer/data/formats/image_folder.h"
#include "worker/trainer/data/formats/random.h"

namespace baton::trainer::internal {
namespace {

class ImageFolderDataset final : public Dataset {
 public:
  ImageFolderDataset(ImageFolderIndex index, int image_size, bool augment)
      : index_(std::move(index)), image_size_(image_size), augment_(augment) {
    info_.name = "image_folder";
    info_.num_classes = static_cast<int64_t>(index_.classes.size());
    info_.input_shape = {3, image_size_, image_size_};
  }

  int64_t size() const override { return static_cast<int64_t>(index_.samples.size()); }
  const DatasetInfo& info() const override { return info_; }

  absl::StatusOr<Batch> Get(absl::Span<const int64_t> indices,
                            uint64_t augment_seed) const override {
    RETURN_IF_ERROR(CheckIndices(indices, size(), "image_folder"));
    const auto b = static_cast<int64_t>(indices.size());
    const int s = image_size_;
    Batch batch{at::empty({b, 3, s, s}, at::kFloat), at::empty({b}, at::kLong)};
    float* out = batch.input.data_ptr<float>();
    int64_t* labels = batch.target.data_ptr<int64_t>();
    for (int64_t j = 0; j < b; ++j) {
      const ImageFolderSample& sample = index_.samples[indices[j]];
      absl::StatusOr<Image> image = ReadImageFile(sample.path);
      if (!image.ok()) {
        // Listed when opened, so any failure now means the data changed or is corrupt.
        return absl::DataLossError(image.status().message());
      }
      CropBox box;
      bool flip = false;
      if (augment_) {
        Prng rng(MixSeed({augment_seed, static_cast<uint64_t>(j)}));
        box = RandomResizedCropBox(image->width, image->height, rng);
        flip = rng.Uniform() < 0.5;
      } else {
        box = CenterCropBox(image->width, image->height, s);
      }
      ResampleToChw(*image, box, s, s, flip, kImageNetNormalization, out + j * 3 * int64_t{s} * s);
      labels[j] = sample.label;
    }
    return batch;
  }

 private:
  const ImageFolderIndex index_;
  const int image_size_;
  const bool augment_;
  DatasetInfo info_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> OpenImageFolder(const DataOptions& options, Split split) {
  const ImageFolderLayout layout = ResolveImageFolderLayout(options.data_dir);
  ASSIGN_OR_RETURN(ImageFolderIndex train, ScanImageFolder(layout.train_dir));
  const int size = static_cast<int>(options.image_size);
  if (split == Split::kTrain) {
    return std::make_unique<ImageFolderDataset>(std::move(train), size, options.augment);
  }
  if (layout.test_dir.empty()) return std::unique_ptr<Dataset>();
  ASSIGN_OR_RETURN(ImageFolderIndex test, ScanImageFolder(layout.test_dir));
  if (test.classes != train.classes) {
    return absl::FailedPreconditionError(
        absl::StrCat(layout.test_dir, ": classes [", absl::StrJoin(test.classes, ", "),
                     "] differ from those of ", layout.train_dir, " [",
                     absl::StrJoin(train.classes, ", "), "]"));
  }
  return std::make_unique<ImageFolderDataset>(std::move(test), size, /*augment=*/false);
}

}  // namespace baton::trainer::internal
