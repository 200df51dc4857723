#include "worker/trainer/checkpoint/checkpoint_file.h"

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::_;
using ::testing::HasSubstr;

// The smallest valid ZIP: an empty archive is just its end-of-central-directory record.
std::vector<char> EmptyZip(const std::string& leading = "") {
  std::vector<char> zip(leading.begin(), leading.end());
  const char eocd[22] = {'P', 'K', 5, 6};
  zip.insert(zip.end(), eocd, eocd + sizeof(eocd));
  return zip;
}

absl::string_view View(const std::vector<char>& v) { return absl::string_view(v.data(), v.size()); }

TEST(Crc32Test, KnownValues) {
  EXPECT_EQ(Crc32(""), 0u);
  EXPECT_EQ(Crc32("123456789"), 0xCBF43926u);  // The standard check value.
  EXPECT_EQ(Crc32("The quick brown fox jumps over the lazy dog"), 0x414FA339u);
  EXPECT_EQ(Crc32("456789", Crc32("123")), 0xCBF43926u);  // Continuation.
  // Every length and alignment agrees with the byte-at-a-time definition.
  std::string data;
  for (int i = 0; i < 200; ++i) data.push_back(static_cast<char>(i * 37 + 11));
  for (size_t start = 0; start < 9; ++start) {
    for (size_t len = 0; start + len <= data.size(); len += 7) {
      const absl::string_view piece = absl::string_view(data).substr(start, len);
      uint32_t slow = 0;
      for (char ch : piece) slow = Crc32(absl::string_view(&ch, 1), slow);
      EXPECT_EQ(Crc32(piece), slow) << start << "+" << len;
    }
  }
}

TEST(SealTest, SealedArchiveVerifiesAndKeepsZipValid) {
  std::vector<char> zip = EmptyZip("payload");
  const size_t original = zip.size();
  ASSERT_OK(SealArchive(zip));
  ASSERT_EQ(zip.size(), original + kCheckpointTrailerSize);
  EXPECT_OK(VerifySealedArchive(View(zip)));
  // The trailer is the archive comment: the EOCD's comment length says 20.
  const size_t eocd = original - 22;
  EXPECT_EQ(static_cast<unsigned char>(zip[eocd + 20]), kCheckpointTrailerSize);
  EXPECT_EQ(zip[eocd + 21], 0);
  EXPECT_EQ(std::string(zip.data() + original, 8), "BTNCKPT1");
}

TEST(SealTest, DetectsDamage) {
  std::vector<char> sealed = EmptyZip("some checkpoint bytes");
  ASSERT_OK(SealArchive(sealed));

  for (size_t keep : {size_t{0}, size_t{10}, sealed.size() - 1, sealed.size() - 20}) {
    std::vector<char> truncated(sealed.begin(), sealed.begin() + keep);
    EXPECT_THAT(VerifySealedArchive(View(truncated)), StatusIs(absl::StatusCode::kDataLoss, _))
        << "kept " << keep;
  }
  std::vector<char> flipped = sealed;
  flipped[3] ^= 0x10;
  EXPECT_THAT(VerifySealedArchive(View(flipped)),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("CRC-32")));
  std::vector<char> longer = sealed;
  longer.insert(longer.begin(), 'x');
  EXPECT_THAT(VerifySealedArchive(View(longer)),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("length")));
}

TEST(SealTest, RejectsNonZipInput) {
  std::vector<char> junk(100, 'x');
  EXPECT_THAT(SealArchive(junk), StatusIs(absl::StatusCode::kInvalidArgument, _));
  std::vector<char> commented = EmptyZip();
  commented[20] = 3;  // Already has a comment.
  EXPECT_THAT(SealArchive(commented), StatusIs(absl::StatusCode::kInvalidArgument, _));
}

TEST(AtomicFileTest, WritesReplacesAndLeavesNoTemporary) {
  const std::string dir = ::testing::TempDir() + "/atomic/sub";
  const std::string path = dir + "/f.bin";
  ASSERT_OK(WriteFileAtomically(path, "first"));
  ASSERT_OK(WriteFileAtomically(path, std::string("sec\0nd", 6)));
  absl::StatusOr<std::vector<char>> bytes = ReadFileBytes(path);
  ASSERT_OK(bytes);
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()), std::string("sec\0nd", 6));
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "f.bin");
  }
  EXPECT_EQ(files, 1);
  EXPECT_THAT(ReadFileBytes(dir + "/missing"), StatusIs(absl::StatusCode::kNotFound, _));
}

// A job cannot make another's trainer write through a symlink planted at its temporary
// name, nor read a checkpoint through a symlink; what it creates is 0700/0600.
TEST(AtomicFileTest, PrivateModesAndNoSymlinkIsFollowed) {
  const mode_t old_umask = ::umask(0);
  const std::string dir = ::testing::TempDir() + "/atomic_private/ckpt";
  const std::string path = dir + "/f.bin";
  const std::string victim = ::testing::TempDir() + "/atomic_private_victim";
  ASSERT_OK(WriteFileAtomically(victim, "victim"));
  ASSERT_OK(WriteFileAtomically(dir + "/first.bin", "first"));  // Creates the directories.
  const std::string tmp = absl::StrCat(path, kTemporaryInfix, ::getpid());
  ASSERT_EQ(::symlink(victim.c_str(), tmp.c_str()), 0);
  ASSERT_OK(WriteFileAtomically(path, "mine"));
  ::umask(old_umask);
  absl::StatusOr<std::vector<char>> bytes = ReadFileBytes(victim);
  ASSERT_OK(bytes);
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()), "victim");  // Not written through.
  struct stat st;
  ASSERT_EQ(::lstat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  ASSERT_EQ(::lstat((::testing::TempDir() + "/atomic_private").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);

  const std::string link = dir + "/g.bin";
  ASSERT_EQ(::symlink(victim.c_str(), link.c_str()), 0);
  EXPECT_THAT(ReadFileBytes(link), StatusIs(absl::StatusCode::kInternal, _));
}

TEST(AtomicFileTest, AFailedPreconditionBeforeTheRenameLeavesTheOldFile) {
  const std::string dir = ::testing::TempDir() + "/atomic_precondition";
  const std::string path = dir + "/f.bin";
  ASSERT_OK(WriteFileAtomically(path, "old"));
  bool ran = false;
  EXPECT_THAT(WriteFileAtomically(path, "new",
                                  [&] {
                                    ran = true;
                                    // The temporary file is complete when the check runs.
                                    EXPECT_EQ(std::filesystem::file_size(
                                                  absl::StrCat(path, kTemporaryInfix, ::getpid())),
                                              3u);
                                    return absl::FailedPreconditionError("fenced");
                                  }),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("fenced")));
  EXPECT_TRUE(ran);
  absl::StatusOr<std::vector<char>> bytes = ReadFileBytes(path);
  ASSERT_OK(bytes);
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()), "old");
  int files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    ++files;
    EXPECT_EQ(entry.path().filename(), "f.bin");
  }
  EXPECT_EQ(files, 1);
  ASSERT_OK(WriteFileAtomically(path, "new", [] { return absl::OkStatus(); }));
  bytes = ReadFileBytes(path);
  ASSERT_OK(bytes);
  EXPECT_EQ(std::string(bytes->begin(), bytes->end()), "new");
}

}  // namespace
}  // namespace baton::trainer
