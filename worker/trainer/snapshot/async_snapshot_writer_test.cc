#include "worker/trainer/snapshot/async_snapshot_writer.h"

#include <ATen/Functions.h>
#include <stdlib.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::baton::StatusIs;

class AsyncSnapshotWriterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/async_snapshot_writer_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  SnapshotImage Image(int64_t step, at::Tensor w) {
    TrainingState s;
    s.progress.step = step;
    s.tensors = {{"w", w}};
    absl::StatusOr<SnapshotImage> image = SnapshotImage::Plan(s);
    EXPECT_OK(image.status());
    return *std::move(image);
  }

  std::string dir_;
};

// The write happens off the caller's thread; Wait makes it complete and visible, and the
// bytes are those the tensor held when Wait returned (the caller kept it still).
TEST_F(AsyncSnapshotWriterTest, WritesInTheBackgroundAndWaitCompletesIt) {
  ASSERT_OK_AND_ASSIGN(auto writer, AsyncSnapshotWriter::Open(dir_, "rank0"));
  at::Tensor w = at::full({100000}, 1.0f);
  for (int64_t step = 1; step <= 5; ++step) {
    w.fill_(static_cast<float>(step));
    writer->Start(/*generation=*/2, Image(step, w));
    EXPECT_TRUE(writer->in_flight());
    ASSERT_OK(writer->Wait());
    EXPECT_FALSE(writer->in_flight());
  }
  const std::vector<SnapshotRef> refs = ListSnapshots(dir_);
  ASSERT_EQ(refs.size(), 2u);
  EXPECT_EQ(refs[0].step, 5);
  ASSERT_OK_AND_ASSIGN(const std::string bytes, ReadSnapshot(refs[0]));
  ASSERT_OK_AND_ASSIGN(const DecodedCheckpoint d, DecodeSnapshot(bytes));
  EXPECT_TRUE(d.model.at("w").equal(at::full({100000}, 5.0f)));
  EXPECT_OK(writer->Wait());  // Nothing in flight.
}

// keep_copy: the bytes written, copied out of the slot, for the disk checkpoint made from
// the snapshot; handed over once, and only for writes that asked.
TEST_F(AsyncSnapshotWriterTest, KeepsACopyOfTheBytesWhenAsked) {
  ASSERT_OK_AND_ASSIGN(auto writer, AsyncSnapshotWriter::Open(dir_, "rank0"));
  writer->Start(1, Image(3, at::full({1000}, 3.0f)), /*keep_copy=*/true);
  ASSERT_OK(writer->Wait());
  std::optional<std::string> copy = writer->TakeCopy();
  ASSERT_TRUE(copy.has_value());
  ASSERT_OK_AND_ASSIGN(const std::string in_slot, ReadSnapshot(ListSnapshots(dir_)[0]));
  EXPECT_EQ(*copy, in_slot);
  EXPECT_FALSE(writer->TakeCopy().has_value());
  writer->Start(1, Image(4, at::full({1000}, 4.0f)));
  ASSERT_OK(writer->Wait());
  EXPECT_FALSE(writer->TakeCopy().has_value());
}

// A failed write is reported by the next Wait, once.
TEST_F(AsyncSnapshotWriterTest, AFailedWriteIsReportedByWait) {
  ASSERT_OK_AND_ASSIGN(auto writer, AsyncSnapshotWriter::Open(dir_, "rank0"));
  std::filesystem::remove_all(dir_);  // Growing the file (the first write) needs the directory.
  writer->Start(1, Image(1, at::zeros({1000})));
  EXPECT_THAT(writer->Wait(), StatusIs(absl::StatusCode::kInternal, ::testing::_));
  EXPECT_OK(writer->Wait());
  writer->Start(1, Image(2, at::zeros({1000})), /*keep_copy=*/true);
  EXPECT_FALSE(writer->Wait().ok());
  EXPECT_FALSE(writer->TakeCopy().has_value());  // No copy of a failed write.
}

// Destroyed with a write in flight: the write completes first.
TEST_F(AsyncSnapshotWriterTest, DestructionWaitsForTheWriteInFlight) {
  {
    ASSERT_OK_AND_ASSIGN(auto writer, AsyncSnapshotWriter::Open(dir_, "rank0"));
    writer->Start(1, Image(7, at::ones({100000})));
  }
  const std::vector<SnapshotRef> refs = ListSnapshots(dir_);
  ASSERT_EQ(refs.size(), 1u);
  EXPECT_EQ(refs[0].step, 7);
}

}  // namespace
}  // namespace baton::trainer
