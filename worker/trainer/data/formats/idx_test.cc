#include "worker/trainer/data/formats/idx.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/data/synthetic_mnist.h"

namespace baton::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

std::string ReadBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

TEST(IdxTest, SyntheticMnistRoundTripsThroughFiles) {
  const std::string dir = TempDir() + "/roundtrip";
  ASSERT_OK(WriteSyntheticMnistDir(dir, /*train_size=*/50, /*test_size=*/20, /*seed=*/7));
  const SyntheticSplit expected = GenerateSyntheticMnist(50, /*seed=*/14);  // 2 * seed.

  absl::StatusOr<MnistImages> images = ReadMnistImages(dir + "/train-images-idx3-ubyte");
  ASSERT_OK(images);
  EXPECT_EQ(images->count, 50u);
  EXPECT_EQ(images->rows, 28u);
  EXPECT_EQ(images->cols, 28u);
  EXPECT_EQ(images->pixels, expected.images.pixels);
  absl::StatusOr<std::vector<uint8_t>> labels = ReadMnistLabels(dir + "/train-labels-idx1-ubyte");
  ASSERT_OK(labels);
  EXPECT_EQ(*labels, expected.labels);

  absl::StatusOr<MnistImages> test_images = ReadMnistImages(dir + "/t10k-images-idx3-ubyte");
  ASSERT_OK(test_images);
  EXPECT_EQ(test_images->count, 20u);
}

TEST(IdxTest, HeaderIsRealMnistLayout) {
  const std::string path = TempDir() + "/header-images";
  MnistImages images{2, 28, 28, std::vector<uint8_t>(2 * 28 * 28, 9)};
  ASSERT_OK(WriteMnistImages(path, images));
  const std::string bytes = ReadBytes(path);
  ASSERT_EQ(bytes.size(), 16u + 2 * 28 * 28);
  // Magic 2051 = 0x00000803, then count 2, rows 28, cols 28, all big-endian.
  EXPECT_EQ(bytes.substr(0, 16), std::string("\0\0\x08\x03\0\0\0\x02\0\0\0\x1c\0\0\0\x1c", 16));

  const std::string label_path = TempDir() + "/header-labels";
  ASSERT_OK(WriteMnistLabels(label_path, {3, 1, 4}));
  EXPECT_EQ(ReadBytes(label_path), std::string("\0\0\x08\x01\0\0\0\x03\x03\x01\x04", 11));
}

TEST(IdxTest, SyntheticDataIsDeterministicPerSeed) {
  const SyntheticSplit a = GenerateSyntheticMnist(30, 5);
  const SyntheticSplit b = GenerateSyntheticMnist(30, 5);
  const SyntheticSplit c = GenerateSyntheticMnist(30, 6);
  EXPECT_EQ(a.images.pixels, b.images.pixels);
  EXPECT_EQ(a.labels, b.labels);
  EXPECT_NE(a.images.pixels, c.images.pixels);
  for (uint8_t label : a.labels) EXPECT_LT(label, kMnistClasses);
}

TEST(IdxTest, RejectsWrongMagic) {
  const std::string path = TempDir() + "/labels-as-images";
  ASSERT_OK(WriteMnistLabels(path, {1, 2, 3}));
  EXPECT_THAT(ReadMnistImages(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr(path), HasSubstr("not an MNIST image file"),
                             HasSubstr("expected 2051"))));

  const std::string garbage = TempDir() + "/garbage";
  WriteBytes(garbage, "GIF89a....");
  EXPECT_THAT(ReadMnistLabels(garbage),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad IDX magic")));
}

TEST(IdxTest, RejectsTruncatedFiles) {
  const std::string path = TempDir() + "/full";
  ASSERT_OK(WriteMnistImages(path, MnistImages{3, 28, 28, std::vector<uint8_t>(3 * 784, 1)}));
  const std::string bytes = ReadBytes(path);

  const std::string short_data = TempDir() + "/short-data";
  WriteBytes(short_data, bytes.substr(0, bytes.size() - 100));
  EXPECT_THAT(ReadMnistImages(short_data),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("truncated"), HasSubstr("2352 data bytes"),
                             HasSubstr("file has 2252"))));

  const std::string short_header = TempDir() + "/short-header";
  WriteBytes(short_header, bytes.substr(0, 10));
  EXPECT_THAT(ReadMnistImages(short_header),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated IDX header")));

  const std::string long_data = TempDir() + "/long-data";
  WriteBytes(long_data, bytes + "x");
  EXPECT_THAT(ReadMnistImages(long_data),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("oversized")));
}

TEST(IdxTest, MissingFileIsNotFound) {
  EXPECT_THAT(ReadIdxFile(TempDir() + "/does-not-exist"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does-not-exist")));
  EXPECT_THAT(ReadMnistImagesDims(TempDir() + "/does-not-exist"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("does-not-exist")));
  EXPECT_THAT(ReadIdxFile(TempDir()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("is a directory")));
}

// A header that claims more data than the file has is refused before anything that size is
// allocated (2^32 - 1 images of 65535 x 65535 bytes would not fit in memory).
TEST(IdxTest, AHugeHeaderOnASmallFileIsDataLoss) {
  const std::string path = TempDir() + "/huge-header";
  WriteBytes(path, std::string("\x00\x00\x08\x03\xff\xff\xff\xff\x00\x00\xff\xff\x00\x00\xff\xff"
                               "pixels",
                               22));
  EXPECT_THAT(ReadMnistImages(path),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("truncated IDX file")));
}

// The dims from the header alone; the magic is checked, the data is not read.
TEST(IdxTest, ImagesDimsFromTheHeader) {
  const std::string dir = TempDir() + "/dims";
  ASSERT_OK(WriteSyntheticMnistDir(dir, 7, 3, 1));
  absl::StatusOr<std::vector<uint32_t>> dims =
      ReadMnistImagesDims(dir + "/train-images-idx3-ubyte");
  ASSERT_OK(dims);
  EXPECT_THAT(*dims, ElementsAre(7, 28, 28));
  EXPECT_THAT(ReadMnistImagesDims(dir + "/train-labels-idx1-ubyte"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an MNIST image file")));
}

TEST(IdxTest, ParseAndSerializeGenericArrays) {
  const IdxArray array{{2, 3}, {1, 2, 3, 4, 5, 6}};
  absl::StatusOr<std::string> bytes = SerializeIdx(array);
  ASSERT_OK(bytes);
  absl::StatusOr<IdxArray> parsed = ParseIdx(*bytes, "mem");
  ASSERT_OK(parsed);
  EXPECT_THAT(parsed->dims, ElementsAre(2, 3));
  EXPECT_EQ(parsed->data, array.data);

  EXPECT_THAT(SerializeIdx(IdxArray{{2, 2}, {1, 2, 3}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("4 elements")));
  EXPECT_THAT(SerializeIdx(IdxArray{{}, {}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1..4 dims")));
}

}  // namespace
}  // namespace baton::trainer
