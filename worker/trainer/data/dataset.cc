// OpenDataset, option validation, and the in-memory datasets: MNIST and CIFAR-10.

#include "worker/trainer/data/dataset.h"

#include <ATen/ops/empty.h>

#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"
#include "worker/trainer/data/datasets_internal.h"
#include "worker/trainer/data/formats/cifar10.h"
#include "worker/trainer/data/formats/random.h"
#include "worker/trainer/data/idx_dataset.h"

namespace baton::trainer {
namespace internal {

absl::Status CheckIndices(absl::Span<const int64_t> indices, int64_t size, absl::string_view what) {
  if (indices.empty()) return absl::OutOfRangeError(absl::StrCat(what, ": empty batch"));
  for (const int64_t i : indices) {
    if (i < 0 || i >= size) {
      return absl::OutOfRangeError(
          absl::StrFormat("%s: sample index %d is not in [0, %d)", what, i, size));
    }
  }
  return absl::OkStatus();
}

namespace {

// ---- MNIST ----------------------------------------------------------------------------

class MnistImageDataset final : public Dataset {
 public:
  explicit MnistImageDataset(MnistDataset data) : data_(std::move(data)) {
    info_.name = "mnist";
    info_.num_classes = kNumClasses;
    info_.input_shape = {1, data_.rows(), data_.cols()};
  }

  int64_t size() const override { return data_.size(); }
  const DatasetInfo& info() const override { return info_; }

  absl::StatusOr<Batch> Get(absl::Span<const int64_t> indices, uint64_t) const override {
    RETURN_IF_ERROR(CheckIndices(indices, size(), "mnist"));
    MnistBatch batch = data_.GetBatch(indices);
    const auto b = static_cast<int64_t>(indices.size());
    return Batch{batch.inputs.view({b, 1, data_.rows(), data_.cols()}), std::move(batch.targets)};
  }

 private:
  const MnistDataset data_;
  DatasetInfo info_;
};

// ---- CIFAR-10 -------------------------------------------------------------------------

constexpr float kCifarMean[3] = {0.4914f, 0.4822f, 0.4465f};
constexpr float kCifarStd[3] = {0.2470f, 0.2435f, 0.2616f};
constexpr int kCifarPad = 4;

class Cifar10Dataset final : public Dataset {
 public:
  Cifar10Dataset(Cifar10Records records, bool augment)
      : records_(std::move(records)), augment_(augment) {
    info_.name = "cifar10";
    info_.num_classes = kCifar10Classes;
    info_.input_shape = {3, kCifar10Side, kCifar10Side};
  }

  int64_t size() const override { return static_cast<int64_t>(records_.labels.size()); }
  const DatasetInfo& info() const override { return info_; }

  absl::StatusOr<Batch> Get(absl::Span<const int64_t> indices,
                            uint64_t augment_seed) const override {
    RETURN_IF_ERROR(CheckIndices(indices, size(), "cifar10"));
    const auto b = static_cast<int64_t>(indices.size());
    constexpr int kSide = kCifar10Side;
    constexpr int kPlane = kSide * kSide;
    Batch batch{at::empty({b, 3, kSide, kSide}, at::kFloat), at::empty({b}, at::kLong)};
    float* out = batch.input.data_ptr<float>();
    int64_t* labels = batch.target.data_ptr<int64_t>();
    float scale[3];
    float shift[3];
    for (int c = 0; c < 3; ++c) {
      scale[c] = 1.0f / (255.0f * kCifarStd[c]);
      shift[c] = -kCifarMean[c] / kCifarStd[c];
    }
    for (int64_t j = 0; j < b; ++j) {
      const uint8_t* image = records_.images.data() + indices[j] * kCifar10ImageBytes;
      labels[j] = records_.labels[indices[j]];
      // RandomCrop(32, padding=4) + RandomHorizontalFlip(): offsets into the zero-padded
      // 40x40 image; padding is intensity 0 before normalisation, as in torchvision.
      int dy = kCifarPad;
      int dx = kCifarPad;
      bool flip = false;
      if (augment_) {
        Prng rng(MixSeed({augment_seed, static_cast<uint64_t>(j)}));
        dy = static_cast<int>(rng.Below(2 * kCifarPad + 1));
        dx = static_cast<int>(rng.Below(2 * kCifarPad + 1));
        flip = rng.Uniform() < 0.5;
      }
      float* sample = out + j * 3 * kPlane;
      for (int c = 0; c < 3; ++c) {
        for (int y = 0; y < kSide; ++y) {
          const int sy = y + dy - kCifarPad;
          for (int x = 0; x < kSide; ++x) {
            const int cx = flip ? kSide - 1 - x : x;  // Flip after the crop.
            const int sx = cx + dx - kCifarPad;
            const bool inside = sy >= 0 && sy < kSide && sx >= 0 && sx < kSide;
            const float v = inside ? image[c * kPlane + sy * kSide + sx] : 0.0f;
            sample[c * kPlane + y * kSide + x] = v * scale[c] + shift[c];
          }
        }
      }
    }
    return batch;
  }

 private:
  const Cifar10Records records_;
  const bool augment_;
  DatasetInfo info_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Dataset>> OpenMnist(const DataOptions& options, Split split) {
  if (split == Split::kTrain) {
    ASSIGN_OR_RETURN(MnistDataset train, LoadMnistTrain(options.data_dir));
    return std::make_unique<MnistImageDataset>(std::move(train));
  }
  ASSIGN_OR_RETURN(std::optional<MnistDataset> test, LoadMnistTest(options.data_dir));
  if (!test.has_value()) return std::unique_ptr<Dataset>();
  return std::make_unique<MnistImageDataset>(std::move(*test));
}

absl::StatusOr<std::unique_ptr<Dataset>> OpenCifar10(const DataOptions& options, Split split) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::path dir(options.data_dir);
  if (!fs::is_directory(dir, ec)) {
    return absl::NotFoundError(absl::StrCat(options.data_dir, ": no such directory (data_dir)"));
  }
  // The official archive unpacks into cifar-10-batches-bin/.
  if (!fs::exists(dir / kCifar10TrainFiles[0], ec) &&
      fs::is_directory(dir / kCifar10ArchiveDir, ec)) {
    dir /= kCifar10ArchiveDir;
  }
  Cifar10Records records;
  if (split == Split::kTrain) {
    for (const char* name : kCifar10TrainFiles) {
      RETURN_IF_ERROR(AppendCifar10File((dir / name).string(), &records));
    }
  } else {
    const fs::path test = dir / kCifar10TestFile;
    if (!fs::exists(test, ec)) return std::unique_ptr<Dataset>();
    RETURN_IF_ERROR(AppendCifar10File(test.string(), &records));
  }
  return std::make_unique<Cifar10Dataset>(std::move(records),
                                          options.augment && split == Split::kTrain);
}

}  // namespace internal

absl::StatusOr<std::unique_ptr<Dataset>> OpenDataset(const DataOptions& options, Split split) {
  DataOptions o = options;
  auto bad = [](const char* field, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
  };
  const bool synthetic = o.dataset == "synthetic";
  if (synthetic && !o.data_dir.empty()) {
    return bad("data_dir",
               absl::StrCat("must be empty for dataset \"synthetic\", got \"", o.data_dir, "\""));
  }
  if (!synthetic && o.data_dir.empty() &&
      (o.dataset == "mnist" || o.dataset == "cifar10" || o.dataset == "image_folder" ||
       o.dataset == "tokens")) {
    return bad("data_dir", absl::StrCat("required for dataset \"", o.dataset, "\""));
  }
  namespace ts = ::baton::trainer_spec;
  if (o.image_size <= 0) {
    o.image_size =
        o.dataset == "image_folder" ? ts::kImageFolderImageSize : ts::kSyntheticImageSize;
  }
  if (o.image_size > ts::kImageSize.max) {
    return bad("image_size",
               absl::StrFormat("%d is larger than %d", o.image_size, ts::kImageSize.max));
  }
  if (o.context_length <= 0) o.context_length = ts::kContextLength.default_value;
  if (o.synthetic_samples <= 0) o.synthetic_samples = ts::kSyntheticSamples.default_value;
  if (o.num_classes <= 0) o.num_classes = ts::kNumClasses.default_value;
  if (o.vocab_size <= 0) o.vocab_size = ts::kVocabSize.default_value;
  try {
    if (o.dataset == "mnist") return internal::OpenMnist(o, split);
    if (o.dataset == "cifar10") return internal::OpenCifar10(o, split);
    if (o.dataset == "image_folder") return internal::OpenImageFolder(o, split);
    if (o.dataset == "tokens") return internal::OpenTokens(o, split);
    if (synthetic) return internal::OpenSynthetic(o, split);
  } catch (const std::exception& e) {  // c10::Error or std::bad_alloc.
    return absl::InternalError(absl::StrCat("opening dataset \"", o.dataset, "\": ", e.what()));
  }
  return bad("dataset", absl::StrCat("unknown dataset \"", o.dataset,
                                     "\" (expected mnist, cifar10, image_folder, tokens or "
                                     "synthetic)"));
}

}  // namespace baton::trainer
