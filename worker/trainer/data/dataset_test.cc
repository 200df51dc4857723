#include "worker/trainer/data/dataset.h"

#include <ATen/ATen.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/data/formats/cifar10.h"
#include "worker/trainer/data/formats/image.h"
#include "worker/trainer/data/formats/image_folder.h"
#include "worker/trainer/data/formats/token_file.h"
#include "worker/trainer/data/idx_dataset.h"
#include "worker/trainer/data/synthetic_mnist.h"

namespace baton::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  const std::string path = std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
  std::filesystem::remove_all(path);
  return path;
}

std::unique_ptr<Dataset> MustOpen(const DataOptions& options, Split split) {
  absl::StatusOr<std::unique_ptr<Dataset>> d = OpenDataset(options, split);
  EXPECT_OK(d);
  return d.ok() ? *std::move(d) : nullptr;
}

Batch MustGet(const Dataset& d, std::vector<int64_t> indices, uint64_t seed = 0) {
  absl::StatusOr<Batch> b = d.Get(indices, seed);
  EXPECT_OK(b);
  return b.ok() ? *std::move(b) : Batch{};
}

void Truncate(const std::string& path, size_t bytes) { std::filesystem::resize_file(path, bytes); }

// ---- MNIST ----------------------------------------------------------------------------

TEST(MnistDatasetTest, ReadsWhatWasWrittenWithMnistNormalisation) {
  const std::string dir = TempDir("mnist");
  ASSERT_OK(WriteSyntheticMnistDir(dir, /*train_size=*/40, /*test_size=*/12, /*seed=*/3));
  const SyntheticSplit expected = GenerateSyntheticMnist(40, /*seed=*/6);
  std::unique_ptr<Dataset> train = MustOpen({.dataset = "mnist", .data_dir = dir}, Split::kTrain);
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->size(), 40);
  EXPECT_EQ(train->info().num_classes, 10);
  EXPECT_FALSE(train->info().language_model);
  EXPECT_THAT(train->info().input_shape, ElementsAre(1, 28, 28));

  const Batch b = MustGet(*train, {5, 0, 5});
  EXPECT_THAT(b.input.sizes(), ElementsAre(3, 1, 28, 28));
  EXPECT_EQ(b.input.scalar_type(), at::kFloat);
  EXPECT_EQ(b.target.scalar_type(), at::kLong);
  EXPECT_EQ(b.target[0].item<int64_t>(), expected.labels[5]);
  EXPECT_EQ(b.target[1].item<int64_t>(), expected.labels[0]);
  for (int pixel : {0, 300, 783}) {
    const double want = (expected.images.pixels[5 * 784 + pixel] / 255.0 - kMnistMean) / kMnistStd;
    EXPECT_NEAR(b.input[0][0][pixel / 28][pixel % 28].item<float>(), want, 1e-5);
  }
  EXPECT_TRUE(b.input[0].equal(b.input[2]));

  std::unique_ptr<Dataset> test = MustOpen({.dataset = "mnist", .data_dir = dir}, Split::kTest);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(test->size(), 12);
}

TEST(MnistDatasetTest, MissingFilesAndNoTestSplit) {
  const std::string dir = TempDir("mnist-train-only");
  ASSERT_OK(WriteSyntheticMnistDir(dir, 20, 5, 1));
  std::filesystem::remove(dir + "/t10k-images-idx3-ubyte");
  std::filesystem::remove(dir + "/t10k-labels-idx1-ubyte");
  absl::StatusOr<std::unique_ptr<Dataset>> test =
      OpenDataset({.dataset = "mnist", .data_dir = dir}, Split::kTest);
  ASSERT_OK(test);
  EXPECT_EQ(*test, nullptr);

  std::filesystem::remove(dir + "/train-labels-idx1-ubyte");
  EXPECT_THAT(OpenDataset({.dataset = "mnist", .data_dir = dir}, Split::kTrain),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("train-labels-idx1-ubyte")));
}

// ---- CIFAR-10 -------------------------------------------------------------------------

// Five train files of `per_file` records and a test file of 3; record r of file f has
// label (f + r) % 10 and pixel p = (7 * f + 3 * r + p) % 256.
Cifar10Records MakeRecords(int file, int count) {
  Cifar10Records records;
  for (int r = 0; r < count; ++r) {
    records.labels.push_back(static_cast<uint8_t>((file + r) % 10));
    for (int p = 0; p < kCifar10ImageBytes; ++p) {
      records.images.push_back(static_cast<uint8_t>((7 * file + 3 * r + p) % 256));
    }
  }
  return records;
}

void WriteCifarDir(const std::string& dir, int per_file) {
  for (int f = 0; f < 5; ++f) {
    ASSERT_OK(WriteCifar10File(dir + "/" + kCifar10TrainFiles[f], MakeRecords(f, per_file)));
  }
  ASSERT_OK(WriteCifar10File(dir + "/" + kCifar10TestFile, MakeRecords(9, 3)));
}

float CifarNormalized(uint8_t v, int c) {
  constexpr float kMean[3] = {0.4914f, 0.4822f, 0.4465f};
  constexpr float kStd[3] = {0.2470f, 0.2435f, 0.2616f};
  return (v / 255.0f - kMean[c]) / kStd[c];
}

TEST(Cifar10DatasetTest, ReadsWhatWasWritten) {
  const std::string dir = TempDir("cifar");
  WriteCifarDir(dir, 4);
  DataOptions o{.dataset = "cifar10", .data_dir = dir, .augment = false};
  std::unique_ptr<Dataset> train = MustOpen(o, Split::kTrain);
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->size(), 20);
  EXPECT_EQ(train->info().num_classes, 10);
  EXPECT_THAT(train->info().input_shape, ElementsAre(3, 32, 32));
  // Sample 6 = file 1, record 2.
  const Batch b = MustGet(*train, {6, 19});
  EXPECT_THAT(b.input.sizes(), ElementsAre(2, 3, 32, 32));
  EXPECT_EQ(b.target[0].item<int64_t>(), 3);
  EXPECT_EQ(b.target[1].item<int64_t>(), (4 + 3) % 10);
  for (int c = 0; c < 3; ++c) {
    for (int y : {0, 17, 31}) {
      for (int x : {0, 5, 31}) {
        const int p = c * 1024 + y * 32 + x;
        EXPECT_NEAR(b.input[0][c][y][x].item<float>(),
                    CifarNormalized(static_cast<uint8_t>((7 + 6 + p) % 256), c), 1e-5);
      }
    }
  }
  std::unique_ptr<Dataset> test = MustOpen(o, Split::kTest);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(test->size(), 3);
}

TEST(Cifar10DatasetTest, AugmentationIsPadCropFlipAndDeterministic) {
  const std::string dir = TempDir("cifar-aug");
  WriteCifarDir(dir, 2);
  std::unique_ptr<Dataset> plain =
      MustOpen({.dataset = "cifar10", .data_dir = dir, .augment = false}, Split::kTrain);
  std::unique_ptr<Dataset> aug = MustOpen({.dataset = "cifar10", .data_dir = dir}, Split::kTrain);
  const std::vector<int64_t> idx = {0, 1, 2, 3, 4, 5, 6, 7};
  const Batch a1 = MustGet(*aug, idx, 11);
  const Batch a2 = MustGet(*aug, idx, 11);
  const Batch a3 = MustGet(*aug, idx, 12);
  EXPECT_TRUE(a1.input.equal(a2.input));
  EXPECT_FALSE(a1.input.equal(a3.input));
  EXPECT_TRUE(a1.target.equal(MustGet(*plain, idx).target));
  // Every augmented value is a source pixel or the padding value.
  const Batch p = MustGet(*plain, idx);
  for (int c = 0; c < 3; ++c) {
    const at::Tensor source = p.input.select(1, c).flatten();
    const at::Tensor got = a1.input.select(1, c).flatten();
    const at::Tensor pad = at::full({1}, CifarNormalized(0, c));
    const at::Tensor allowed = at::cat({source, pad});
    EXPECT_TRUE(at::isin(got, allowed).all().item<bool>()) << c;
  }
  // The test split is never augmented.
  std::unique_ptr<Dataset> test = MustOpen({.dataset = "cifar10", .data_dir = dir}, Split::kTest);
  EXPECT_TRUE(MustGet(*test, {0, 1}, 1).input.equal(MustGet(*test, {0, 1}, 2).input));
}

TEST(Cifar10DatasetTest, FindsTheArchiveSubdirectory) {
  const std::string dir = TempDir("cifar-archive");
  WriteCifarDir(dir + "/cifar-10-batches-bin", 1);
  std::unique_ptr<Dataset> train = MustOpen({.dataset = "cifar10", .data_dir = dir}, Split::kTrain);
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->size(), 5);
}

TEST(Cifar10DatasetTest, CorruptAndMissingFiles) {
  const std::string dir = TempDir("cifar-bad");
  WriteCifarDir(dir, 2);
  const std::string batch3 = dir + "/data_batch_3.bin";
  Truncate(batch3, 2 * kCifar10RecordBytes - 5);
  EXPECT_THAT(OpenDataset({.dataset = "cifar10", .data_dir = dir}, Split::kTrain),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("data_batch_3.bin"), HasSubstr("3073-byte records"))));
  std::filesystem::remove(batch3);
  EXPECT_THAT(OpenDataset({.dataset = "cifar10", .data_dir = dir}, Split::kTrain),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("data_batch_3.bin")));
  Cifar10Records bad_label = MakeRecords(0, 1);
  bad_label.labels[0] = 10;
  ASSERT_OK(WriteCifar10File(batch3, bad_label));
  EXPECT_THAT(OpenDataset({.dataset = "cifar10", .data_dir = dir}, Split::kTrain),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("data_batch_3.bin"), HasSubstr("label 10"))));
  EXPECT_THAT(OpenDataset({.dataset = "cifar10", .data_dir = dir + "/nope"}, Split::kTrain),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("nope")));
}

// ---- image folder ---------------------------------------------------------------------

Image Solid(int w, int h, uint8_t r, uint8_t g, uint8_t b) {
  Image image{w, h, {}};
  for (int i = 0; i < w * h; ++i) image.pixels.insert(image.pixels.end(), {r, g, b});
  return image;
}

// Image i of a class: a horizontal gradient of the class colour, w x h varying.
std::vector<Image> ClassImages(uint8_t r, uint8_t g, uint8_t b, int count) {
  std::vector<Image> images;
  for (int i = 0; i < count; ++i) {
    const int w = 40 + 7 * i;
    const int h = 30 + 5 * i;
    Image image{w, h, {}};
    for (int y = 0; y < h; ++y) {
      for (int x = 0; x < w; ++x) {
        const double t = static_cast<double>(x) / w;
        image.pixels.insert(image.pixels.end(),
                            {static_cast<uint8_t>(r * t), g, static_cast<uint8_t>(b * (1 - t))});
      }
    }
    images.push_back(std::move(image));
  }
  return images;
}

TEST(ImageFolderDatasetTest, TrainTransformShapeAndDeterminism) {
  const std::string dir = TempDir("folder-flat");
  ASSERT_OK(WriteImageFolderClass(dir, "dog", ClassImages(200, 10, 90, 3)));
  ASSERT_OK(WriteImageFolderClass(dir, "cat", ClassImages(20, 240, 120, 2), ".jpg"));
  DataOptions o{.dataset = "image_folder", .data_dir = dir, .image_size = 24};
  std::unique_ptr<Dataset> train = MustOpen(o, Split::kTrain);
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->size(), 5);
  EXPECT_EQ(train->info().num_classes, 2);
  EXPECT_THAT(train->info().input_shape, ElementsAre(3, 24, 24));
  const std::vector<int64_t> idx = {0, 1, 2, 3, 4, 4};
  const Batch a = MustGet(*train, idx, 5);
  EXPECT_THAT(a.input.sizes(), ElementsAre(6, 3, 24, 24));
  EXPECT_THAT(std::vector<int64_t>(a.target.data_ptr<int64_t>(), a.target.data_ptr<int64_t>() + 6),
              ElementsAre(0, 0, 1, 1, 1, 1));  // "cat" < "dog".
  EXPECT_TRUE(a.input.equal(MustGet(*train, idx, 5).input));
  EXPECT_FALSE(a.input.equal(MustGet(*train, idx, 6).input));
  EXPECT_FALSE(a.input[4].equal(a.input[5]));  // Same image, own crop per position.
  EXPECT_TRUE(at::isfinite(a.input).all().item<bool>());
  absl::StatusOr<std::unique_ptr<Dataset>> test = OpenDataset(o, Split::kTest);
  ASSERT_OK(test);
  EXPECT_EQ(*test, nullptr);  // Flat layout: no test split.
}

TEST(ImageFolderDatasetTest, SplitLayoutTestTransformIsCentreCrop) {
  const std::string dir = TempDir("folder-split");
  ASSERT_OK(WriteImageFolderClass(dir + "/train", "a", {Solid(50, 40, 1, 2, 3)}));
  ASSERT_OK(WriteImageFolderClass(dir + "/train", "b", {Solid(50, 40, 4, 5, 6)}));
  ASSERT_OK(WriteImageFolderClass(dir + "/val", "a", {Solid(64, 48, 30, 60, 90)}));
  ASSERT_OK(WriteImageFolderClass(dir + "/val", "b", {Solid(33, 77, 200, 100, 0)}));
  DataOptions o{.dataset = "image_folder", .data_dir = dir, .image_size = 16};
  std::unique_ptr<Dataset> test = MustOpen(o, Split::kTest);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(test->size(), 2);
  const Batch b = MustGet(*test, {1, 0}, 3);
  EXPECT_THAT(b.input.sizes(), ElementsAre(2, 3, 16, 16));
  EXPECT_EQ(b.target[0].item<int64_t>(), 1);
  const uint8_t colour[3] = {200, 100, 0};
  for (int c = 0; c < 3; ++c) {
    const float want =
        (colour[c] / 255.0f - kImageNetNormalization.mean[c]) / kImageNetNormalization.std[c];
    EXPECT_NEAR(b.input[0][c].min().item<float>(), want, 1e-4);
    EXPECT_NEAR(b.input[0][c].max().item<float>(), want, 1e-4);
  }
  EXPECT_TRUE(b.input.equal(MustGet(*test, {1, 0}, 99).input));  // No augmentation.

  ASSERT_OK(WriteImageFolderClass(dir + "/val", "c", {Solid(8, 8, 0, 0, 0)}));
  EXPECT_THAT(OpenDataset(o, Split::kTest),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("classes [a, b, c]")));
}

TEST(ImageFolderDatasetTest, CorruptImageFailsGetNamingTheFile) {
  const std::string dir = TempDir("folder-corrupt");
  ASSERT_OK(WriteImageFolderClass(dir, "x", {Solid(8, 8, 0, 0, 0), Solid(8, 8, 1, 1, 1)}));
  const std::string bad = dir + "/x/img_00001.png";
  Truncate(bad, 20);
  std::unique_ptr<Dataset> train =
      MustOpen({.dataset = "image_folder", .data_dir = dir, .image_size = 8}, Split::kTrain);
  ASSERT_NE(train, nullptr);
  EXPECT_OK(train->Get(std::vector<int64_t>{0}, 1));
  EXPECT_THAT(train->Get(std::vector<int64_t>{0, 1}, 1),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr(bad)));
  EXPECT_THAT(OpenDataset({.dataset = "image_folder", .data_dir = dir + "/none"}, Split::kTrain),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none")));
}

// ---- tokens ---------------------------------------------------------------------------

TEST(TokenDatasetTest, WindowsAreShiftedByOne) {
  const std::string dir = TempDir("tokens");
  std::vector<uint16_t> tokens;
  for (int i = 0; i < 43; ++i) tokens.push_back(static_cast<uint16_t>(1000 + i * 37));
  ASSERT_OK(WriteTokenFile(dir + "/train.bin", tokens));
  DataOptions o{.dataset = "tokens", .data_dir = dir, .context_length = 8, .vocab_size = 4000};
  std::unique_ptr<Dataset> train = MustOpen(o, Split::kTrain);
  ASSERT_NE(train, nullptr);
  EXPECT_EQ(train->size(), 5);  // (43 - 1) / 8.
  EXPECT_TRUE(train->info().language_model);
  EXPECT_EQ(train->info().vocab_size, 4000);
  EXPECT_THAT(train->info().input_shape, ElementsAre(8));
  const Batch b = MustGet(*train, {4, 1});
  EXPECT_THAT(b.input.sizes(), ElementsAre(2, 8));
  EXPECT_THAT(b.target.sizes(), ElementsAre(2, 8));
  for (int t = 0; t < 8; ++t) {
    EXPECT_EQ(b.input[0][t].item<int64_t>(), tokens[32 + t]);
    EXPECT_EQ(b.target[0][t].item<int64_t>(), tokens[33 + t]);
    EXPECT_EQ(b.input[1][t].item<int64_t>(), tokens[8 + t]);
  }
  EXPECT_THAT(train->Get(std::vector<int64_t>{5}, 0),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("index 5")));
  absl::StatusOr<std::unique_ptr<Dataset>> test = OpenDataset(o, Split::kTest);
  ASSERT_OK(test);
  EXPECT_EQ(*test, nullptr);
  ASSERT_OK(WriteTokenFile(dir + "/val.bin", std::vector<uint16_t>(17, 3)));
  std::unique_ptr<Dataset> val = MustOpen(o, Split::kTest);
  ASSERT_NE(val, nullptr);
  EXPECT_EQ(val->size(), 2);
}

TEST(TokenDatasetTest, VocabularyAndFileChecks) {
  const std::string dir = TempDir("tokens-bad");
  ASSERT_OK(WriteTokenFile(dir + "/train.bin", {1, 2, 3, 700, 5, 6, 7, 8, 9, 10}));
  EXPECT_THAT(
      OpenDataset({.dataset = "tokens", .data_dir = dir, .context_length = 4, .vocab_size = 512},
                  Split::kTrain),
      StatusIs(absl::StatusCode::kInvalidArgument,
               AllOf(HasSubstr("vocab_size"), HasSubstr("train.bin"), HasSubstr("700"))));
  EXPECT_THAT(
      OpenDataset({.dataset = "tokens", .data_dir = dir, .context_length = 10, .vocab_size = 1024},
                  Split::kTrain),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("context_length")));
  Truncate(dir + "/train.bin", 7);
  EXPECT_THAT(
      OpenDataset({.dataset = "tokens", .data_dir = dir}, Split::kTrain),
      StatusIs(absl::StatusCode::kDataLoss, AllOf(HasSubstr("train.bin"), HasSubstr("uint16"))));
  std::filesystem::remove(dir + "/train.bin");
  EXPECT_THAT(OpenDataset({.dataset = "tokens", .data_dir = dir}, Split::kTrain),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("train.bin")));
}

// ---- synthetic and options ------------------------------------------------------------

TEST(SyntheticDatasetTest, ImagesAreDeterministicPerSeed) {
  DataOptions o{.dataset = "synthetic",
                .image_size = 12,
                .synthetic_samples = 100,
                .num_classes = 5,
                .seed = 9};
  std::unique_ptr<Dataset> a = MustOpen(o, Split::kTrain);
  std::unique_ptr<Dataset> b = MustOpen(o, Split::kTrain);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->size(), 100);
  EXPECT_EQ(a->info().num_classes, 5);
  EXPECT_THAT(a->info().input_shape, ElementsAre(3, 12, 12));
  const Batch x = MustGet(*a, {0, 1, 2, 99});
  EXPECT_THAT(x.input.sizes(), ElementsAre(4, 3, 12, 12));
  EXPECT_TRUE(x.input.equal(MustGet(*b, {0, 1, 2, 99}).input));
  EXPECT_TRUE(x.target.ge(0).all().item<bool>() && x.target.lt(5).all().item<bool>());
  o.seed = 10;
  EXPECT_FALSE(x.input.equal(MustGet(*MustOpen(o, Split::kTrain), {0, 1, 2, 99}).input));
  std::unique_ptr<Dataset> test = MustOpen(o, Split::kTest);
  ASSERT_NE(test, nullptr);
  EXPECT_EQ(test->size(), 12);
  // Default image size.
  EXPECT_THAT(MustOpen({.dataset = "synthetic"}, Split::kTrain)->info().input_shape,
              ElementsAre(3, 32, 32));
}

TEST(SyntheticDatasetTest, TokensAreShiftedSequences) {
  std::unique_ptr<Dataset> d = MustOpen({.dataset = "synthetic",
                                         .context_length = 6,
                                         .synthetic_samples = 10,
                                         .vocab_size = 100,
                                         .synthetic_tokens = true},
                                        Split::kTrain);
  ASSERT_NE(d, nullptr);
  EXPECT_TRUE(d->info().language_model);
  const Batch b = MustGet(*d, {3, 7});
  EXPECT_THAT(b.input.sizes(), ElementsAre(2, 6));
  EXPECT_TRUE(b.input.slice(1, 1).equal(b.target.slice(1, 0, 5)));
  EXPECT_TRUE(b.input.lt(100).all().item<bool>());
}

TEST(OpenDatasetTest, RejectsBadOptions) {
  EXPECT_THAT(OpenDataset({.dataset = "imagenet", .data_dir = "/x"}, Split::kTrain),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("dataset"), HasSubstr("imagenet"))));
  EXPECT_THAT(OpenDataset({.dataset = "synthetic", .data_dir = "/x"}, Split::kTrain),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("data_dir")));
  EXPECT_THAT(OpenDataset({.dataset = "cifar10"}, Split::kTrain),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("data_dir: required")));
  std::unique_ptr<Dataset> d =
      MustOpen({.dataset = "synthetic", .synthetic_samples = 4}, Split::kTrain);
  EXPECT_THAT(d->Get(std::vector<int64_t>{}, 0),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("empty")));
  EXPECT_THAT(d->Get(std::vector<int64_t>{-1}, 0),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("-1")));
}

}  // namespace
}  // namespace baton::trainer
