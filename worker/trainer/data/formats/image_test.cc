#include "worker/trainer/data/formats/image.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/data/formats/image_folder.h"
#include "worker/trainer/data/formats/random.h"

namespace baton::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

Image RandomImage(int width, int height, uint64_t seed) {
  Prng rng(seed);
  Image image{width, height, std::vector<uint8_t>(static_cast<size_t>(width) * height * 3)};
  for (uint8_t& p : image.pixels) p = static_cast<uint8_t>(rng.Below(256));
  return image;
}

Image SolidImage(int width, int height, uint8_t r, uint8_t g, uint8_t b) {
  Image image{width, height, {}};
  for (int i = 0; i < width * height; ++i) image.pixels.insert(image.pixels.end(), {r, g, b});
  return image;
}

float Normalized(uint8_t v, int c) {
  return (v / 255.0f - kImageNetNormalization.mean[c]) / kImageNetNormalization.std[c];
}

TEST(ImageTest, PngRoundTripsExactlyAndJpegClosely) {
  const Image image = RandomImage(13, 7, 1);
  const std::string png = TempDir() + "/img/round.png";
  ASSERT_OK(WriteImageFile(png, image));
  absl::StatusOr<Image> decoded = ReadImageFile(png);
  ASSERT_OK(decoded);
  EXPECT_EQ(decoded->width, 13);
  EXPECT_EQ(decoded->height, 7);
  EXPECT_EQ(decoded->pixels, image.pixels);

  const Image smooth = SolidImage(16, 16, 200, 100, 50);
  const std::string jpg = TempDir() + "/img/round.JPG";
  ASSERT_OK(WriteImageFile(jpg, smooth));
  absl::StatusOr<Image> from_jpeg = ReadImageFile(jpg);
  ASSERT_OK(from_jpeg);
  ASSERT_EQ(from_jpeg->pixels.size(), smooth.pixels.size());
  for (size_t i = 0; i < smooth.pixels.size(); ++i) {
    EXPECT_NEAR(from_jpeg->pixels[i], smooth.pixels[i], 3) << i;
  }
}

TEST(ImageTest, BadFilesGiveClearStatuses) {
  const std::string garbage = TempDir() + "/img/garbage.png";
  std::ofstream(garbage) << "this is not a PNG";
  EXPECT_THAT(ReadImageFile(garbage),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr(garbage), HasSubstr("cannot decode image"))));
  EXPECT_THAT(ReadImageFile(TempDir() + "/img/none.png"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("none.png")));
  EXPECT_THAT(WriteImageFile(TempDir() + "/img/x.gif", SolidImage(2, 2, 0, 0, 0)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("extension")));
}

// A PNG signature and IHDR chunk claiming `width` x `height` RGB pixels, then an IDAT chunk
// header claiming `idat_bytes` (no data follows; stb checks no CRC).
std::string PngHeader(uint32_t width, uint32_t height, uint32_t idat_bytes) {
  auto be32 = [](uint32_t v) {
    return std::string{static_cast<char>(v >> 24), static_cast<char>(v >> 16),
                       static_cast<char>(v >> 8), static_cast<char>(v)};
  };
  return std::string("\x89PNG\r\n\x1a\n", 8) + be32(13) + "IHDR" + be32(width) + be32(height) +
         std::string("\x08\x02\x00\x00\x00", 5) + be32(0) + be32(idat_bytes) + "IDAT";
}

// A few bytes must not make the decoder allocate gigabytes: a header over kMaxImagePixels
// is refused before decoding, and a chunk claiming more than any such image needs fails
// cleanly. (That stb's allocator cap refuses the chunk's 2 GiB realloc is shown by
// image_fuzz's regression-png-huge-idat-chunk, where libFuzzer fails such an allocation.)
TEST(ImageTest, HeadersClaimingHugeImagesAreRefusedBeforeAllocating) {
  EXPECT_THAT(DecodeImage(PngHeader(8000, 9000, 16), "big.png"),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("big.png"), HasSubstr("8000x9000 pixels is larger"))));
  EXPECT_THAT(DecodeImage(PngHeader(2, 2, 0x7ffffff0u), "chunk.png"),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("cannot decode image")));
}

// Found by //worker/trainer/data/formats:image_fuzz: stb_image 2.27 wrote past its Huffman
// arrays when a table's code counts add up to more than 256 (fix_stb_image.sh).
TEST(ImageTest, AJpegHuffmanTableWithTooManyCodesIsRefused) {
  const std::string jpg = TempDir() + "/img/huffman.jpg";
  ASSERT_OK(WriteImageFile(jpg, SolidImage(8, 8, 10, 20, 30)));
  std::ifstream in(jpg, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_OK(DecodeImage(bytes, "valid"));
  const size_t dht = bytes.find("\xFF\xC4");
  ASSERT_NE(dht, std::string::npos);
  bytes[dht + 5 + 14] = '\xFF';  // The first table's counts of 15- and 16-bit codes.
  bytes[dht + 5 + 15] = '\xFF';
  EXPECT_THAT(DecodeImage(bytes, "bad.jpg"),
              StatusIs(absl::StatusCode::kDataLoss,
                       AllOf(HasSubstr("bad.jpg"), HasSubstr("bad DHT header"))));
}

TEST(ImageTest, IdentityResampleIsExactNormalisation) {
  const Image image = RandomImage(9, 6, 2);
  std::vector<float> out(3 * 9 * 6);
  ResampleToChw(image, CropBox{0, 0, 9, 6}, 9, 6, /*flip=*/false, kImageNetNormalization,
                out.data());
  std::vector<float> flipped(out.size());
  ResampleToChw(image, CropBox{0, 0, 9, 6}, 9, 6, /*flip=*/true, kImageNetNormalization,
                flipped.data());
  for (int c = 0; c < 3; ++c) {
    for (int y = 0; y < 6; ++y) {
      for (int x = 0; x < 9; ++x) {
        const float want = Normalized(image.pixels[(y * 9 + x) * 3 + c], c);
        EXPECT_NEAR(out[(c * 6 + y) * 9 + x], want, 1e-5);
        EXPECT_NEAR(flipped[(c * 6 + y) * 9 + (8 - x)], want, 1e-5);
      }
    }
  }
}

TEST(ImageTest, ResamplingPreservesConstantsAndAntialiases) {
  std::vector<float> out(3 * 5 * 5);
  ResampleToChw(SolidImage(37, 23, 10, 128, 250), CropBox{3.5, 2.25, 20.5, 17}, 5, 5, false,
                kImageNetNormalization, out.data());
  for (int i = 0; i < 25; ++i) {
    EXPECT_NEAR(out[i], Normalized(10, 0), 1e-4);
    EXPECT_NEAR(out[25 + i], Normalized(128, 1), 1e-4);
    EXPECT_NEAR(out[50 + i], Normalized(250, 2), 1e-4);
  }
  // A 1-pixel checkerboard shrunk 4x averages to mid-grey (no aliasing).
  Image board{16, 16, {}};
  for (int y = 0; y < 16; ++y) {
    for (int x = 0; x < 16; ++x) {
      const uint8_t v = (x + y) % 2 == 0 ? 0 : 255;
      board.pixels.insert(board.pixels.end(), {v, v, v});
    }
  }
  const Normalization identity = {{0, 0, 0}, {1, 1, 1}};
  std::vector<float> small(3 * 4 * 4);
  ResampleToChw(board, CropBox{0, 0, 16, 16}, 4, 4, false, identity, small.data());
  for (float v : small) EXPECT_NEAR(v, 0.5, 0.07);
}

TEST(ImageTest, RandomResizedCropBoxFollowsTorchvisionRanges) {
  Prng rng(7);
  for (int i = 0; i < 500; ++i) {
    const int w = 20 + static_cast<int>(rng.Below(300));
    const int h = 20 + static_cast<int>(rng.Below(300));
    const CropBox box = RandomResizedCropBox(w, h, rng);
    ASSERT_GE(box.x, 0);
    ASSERT_GE(box.y, 0);
    ASSERT_LE(box.x + box.width, w);
    ASSERT_LE(box.y + box.height, h);
    ASSERT_GT(box.width, 0);
    ASSERT_GT(box.height, 0);
    const double ratio = box.width / box.height;
    const double area = box.width * box.height / (static_cast<double>(w) * h);
    // Integer rounding of the sides loosens the bounds a little for small crops.
    EXPECT_GE(ratio, 0.75 * 0.8) << w << "x" << h;
    EXPECT_LE(ratio, 4.0 / 3.0 * 1.25) << w << "x" << h;
    EXPECT_GE(area, 0.08 * 0.7) << w << "x" << h;
  }
  Prng a(3);
  Prng b(3);
  const CropBox x = RandomResizedCropBox(100, 80, a);
  const CropBox y = RandomResizedCropBox(100, 80, b);
  EXPECT_EQ(x.x, y.x);
  EXPECT_EQ(x.width, y.width);
  // A strip far outside the ratio range falls back to a centred crop of clamped ratio.
  Prng c(4);
  const CropBox strip = RandomResizedCropBox(1000, 10, c, 0.9, 1.0);
  EXPECT_DOUBLE_EQ(strip.height, 10);
  EXPECT_DOUBLE_EQ(strip.width, 13);
  EXPECT_DOUBLE_EQ(strip.x, std::floor((1000 - 13) / 2.0));
}

TEST(ImageTest, CenterCropBoxMatchesResize256CenterCrop224) {
  const CropBox box = CenterCropBox(512, 384, 224);  // Resize(256): 384 -> 256, x1.5.
  EXPECT_DOUBLE_EQ(box.width, 224 * 1.5);
  EXPECT_DOUBLE_EQ(box.height, 224 * 1.5);
  EXPECT_DOUBLE_EQ(box.x, (512 - 336) / 2.0);
  EXPECT_DOUBLE_EQ(box.y, (384 - 336) / 2.0);
  const CropBox tiny = CenterCropBox(10, 10, 224);  // Upscaled: the box is the image.
  EXPECT_NEAR(tiny.width, 10 * 224 / 256.0, 1e-9);
}

TEST(ImageFolderTest, ScansClassesAndFilesInSortedOrder) {
  const std::string dir = TempDir() + "/folder";
  ASSERT_OK(WriteImageFolderClass(dir, "zebra", {SolidImage(4, 4, 1, 1, 1)}));
  ASSERT_OK(WriteImageFolderClass(dir, "ant",
                                  {SolidImage(4, 4, 2, 2, 2), SolidImage(5, 4, 3, 3, 3)}, ".jpg"));
  std::ofstream(dir + "/ant/notes.txt") << "ignored";
  absl::StatusOr<ImageFolderIndex> index = ScanImageFolder(dir);
  ASSERT_OK(index);
  EXPECT_THAT(index->classes, ElementsAre("ant", "zebra"));
  ASSERT_EQ(index->samples.size(), 3u);
  EXPECT_EQ(index->samples[0].path, dir + "/ant/img_00000.jpg");
  EXPECT_EQ(index->samples[0].label, 0);
  EXPECT_EQ(index->samples[1].path, dir + "/ant/img_00001.jpg");
  EXPECT_EQ(index->samples[2].path, dir + "/zebra/img_00000.png");
  EXPECT_EQ(index->samples[2].label, 1);

  EXPECT_EQ(ResolveImageFolderLayout(dir).train_dir, dir);
  EXPECT_EQ(ResolveImageFolderLayout(dir).test_dir, "");
}

TEST(ImageFolderTest, BadLayoutsGiveClearStatuses) {
  EXPECT_THAT(ScanImageFolder(TempDir() + "/no-such-folder"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no-such-folder")));
  const std::string empty_class = TempDir() + "/empty-class";
  ASSERT_OK(WriteImageFolderClass(empty_class, "cat", {SolidImage(2, 2, 0, 0, 0)}));
  std::ofstream(TempDir() + "/empty-class/dog-is-a-file") << "x";
  std::filesystem::create_directories(empty_class + "/dog");
  EXPECT_THAT(ScanImageFolder(empty_class),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("empty-class/dog"), HasSubstr("no .jpg/.jpeg/.png"))));
  const std::string flat = TempDir() + "/flat";
  std::filesystem::create_directories(flat);
  EXPECT_THAT(ScanImageFolder(flat),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no class directories")));
}

}  // namespace
}  // namespace baton::trainer
