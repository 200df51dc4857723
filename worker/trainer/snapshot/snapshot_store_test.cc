#include "worker/trainer/snapshot/snapshot_store.h"

#include <ATen/Functions.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::baton::StatusIs;

class SnapshotStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/snapshot_store_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // A state of `floats` parameters all equal to `step`, at `step`.
  SnapshotImage Image(int64_t step, int64_t floats = 1000) {
    weights_ = at::full({floats}, static_cast<float>(step));
    TrainingState s;
    s.progress.step = step;
    s.tensors = {{"w", weights_}};
    absl::StatusOr<SnapshotImage> image = SnapshotImage::Plan(s);
    EXPECT_OK(image.status());
    return *std::move(image);
  }

  // The step stored in `ref`, decoded.
  int64_t StepIn(const SnapshotRef& ref) {
    absl::StatusOr<std::string> bytes = ReadSnapshot(ref);
    EXPECT_OK(bytes.status());
    absl::StatusOr<DecodedCheckpoint> d = DecodeSnapshot(*bytes);
    EXPECT_OK(d.status());
    EXPECT_EQ(d->model.at("w")[0].item<float>(), static_cast<float>(d->progress.step));
    return d->progress.step;
  }

  std::vector<int64_t> Steps() {
    std::vector<int64_t> steps;
    for (const SnapshotRef& r : ListSnapshots(dir_)) steps.push_back(r.step);
    return steps;
  }

  // Overwrites 8 bytes of `path` at `offset` (as a writer killed mid-copy leaves them).
  void Poke(const std::string& path, off_t offset, uint64_t value) {
    const int fd = ::open(path.c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(::pwrite(fd, &value, sizeof(value), offset), static_cast<ssize_t>(sizeof(value)));
    ::close(fd);
  }

  std::string dir_;
  at::Tensor weights_;
};

TEST_F(SnapshotStoreTest, EmptyOrMissingDirectoryHasNone) {
  EXPECT_TRUE(ListSnapshots(dir_).empty());
  EXPECT_TRUE(ListSnapshots(dir_ + "/missing").empty());
}

// Two slots: after three writes the newest two are complete, newest first.
TEST_F(SnapshotStoreTest, KeepsTheNewestTwo) {
  ASSERT_OK_AND_ASSIGN(auto writer, SnapshotWriter::Open(dir_, "rank0"));
  for (int64_t step = 1; step <= 3; ++step) ASSERT_OK(writer->Write(/*generation=*/1, Image(step)));
  EXPECT_THAT(Steps(), ::testing::ElementsAre(3, 2));
  const std::vector<SnapshotRef> refs = ListSnapshots(dir_);
  EXPECT_EQ(StepIn(refs[0]), 3);
  EXPECT_EQ(StepIn(refs[1]), 2);
  EXPECT_EQ(refs[0].generation, 1);
}

// A later process of the same writer keeps what the file holds until it has something newer,
// and then overwrites the older slot only.
TEST_F(SnapshotStoreTest, ANewWriterKeepsTheNewestUntilItWrites) {
  {
    ASSERT_OK_AND_ASSIGN(auto writer, SnapshotWriter::Open(dir_, "rank0"));
    ASSERT_OK(writer->Write(1, Image(7)));
    ASSERT_OK(writer->Write(1, Image(8)));
  }
  ASSERT_OK_AND_ASSIGN(auto writer, SnapshotWriter::Open(dir_, "rank0"));
  EXPECT_THAT(Steps(), ::testing::ElementsAre(8, 7));
  ASSERT_OK(writer->Write(2, Image(9)));
  EXPECT_THAT(Steps(), ::testing::ElementsAre(9, 8));  // Generation 2 first.
}

// A write cut short (the slot's sequence number left odd) is never listed; the other slot is.
TEST_F(SnapshotStoreTest, ATornSlotIsSkipped) {
  ASSERT_OK_AND_ASSIGN(auto writer, SnapshotWriter::Open(dir_, "rank0"));
  ASSERT_OK(writer->Write(1, Image(1)));
  ASSERT_OK(writer->Write(1, Image(2)));
  const SnapshotRef newest = ListSnapshots(dir_)[0];
  Poke(newest.path, 64 + 64 * newest.slot, newest.seq + 1);
  EXPECT_THAT(Steps(), ::testing::ElementsAre(1));
  // The writer's next write goes into the torn slot, keeping step 1.
  ASSERT_OK(writer->Write(1, Image(3)));
  EXPECT_THAT(Steps(), ::testing::ElementsAre(3, 1));
}

// A slot listed, then rewritten before it is read, is reported rather than returned.
TEST_F(SnapshotStoreTest, AReadOfARewrittenSlotIsDataLoss) {
  ASSERT_OK_AND_ASSIGN(auto writer, SnapshotWriter::Open(dir_, "rank0"));
  ASSERT_OK(writer->Write(1, Image(1)));
  ASSERT_OK(writer->Write(1, Image(2)));
  const SnapshotRef older = ListSnapshots(dir_)[1];
  ASSERT_OK(writer->Write(1, Image(3)));  // Into older's slot.
  EXPECT_THAT(ReadSnapshot(older), StatusIs(absl::StatusCode::kDataLoss, ::testing::_));
}

// A larger state replaces the file with larger slots; the new snapshot is complete.
TEST_F(SnapshotStoreTest, GrowsForALargerState) {
  ASSERT_OK_AND_ASSIGN(auto writer, SnapshotWriter::Open(dir_, "rank0"));
  ASSERT_OK(writer->Write(1, Image(1, 10)));
  const size_t small = writer->capacity_bytes();
  ASSERT_OK(writer->Write(1, Image(2, 100000)));
  EXPECT_GT(writer->capacity_bytes(), small);
  EXPECT_EQ(StepIn(ListSnapshots(dir_)[0]), 2);
  ASSERT_OK(writer->Write(1, Image(3, 100000)));
  EXPECT_THAT(Steps(), ::testing::ElementsAre(3, 2));
}

// Several writers share a directory; files that are not snapshot files are ignored.
TEST_F(SnapshotStoreTest, ListsEveryWriterAndSkipsOtherFiles) {
  ASSERT_OK_AND_ASSIGN(auto a, SnapshotWriter::Open(dir_, "rank0"));
  ASSERT_OK_AND_ASSIGN(auto b, SnapshotWriter::Open(dir_, "rank2"));
  ASSERT_OK(a->Write(3, Image(5)));
  ASSERT_OK(b->Write(3, Image(6)));
  std::ofstream(dir_ + "/snapshot-junk.bin") << "not a snapshot file";
  std::ofstream(dir_ + "/other.txt") << "x";
  EXPECT_THAT(Steps(), ::testing::ElementsAre(6, 5));
}

TEST_F(SnapshotStoreTest, RefusesBadNames) {
  EXPECT_THAT(SnapshotWriter::Open(dir_, ""),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(SnapshotWriter::Open(dir_, "../x"),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  EXPECT_THAT(SnapshotWriter::Open(dir_ + "/missing", "rank0"),
              StatusIs(absl::StatusCode::kInternal, ::testing::_));
}

}  // namespace
}  // namespace baton::trainer
