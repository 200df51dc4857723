#include "worker/trainer/checkpoint/checkpoint_listing.h"

#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

namespace fs = std::filesystem;

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string NewDir(const std::string& name) {
  const fs::path dir = fs::path(::testing::TempDir()) / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir.string();
}

void Touch(const std::string& dir, const std::string& name, const std::string& text = "") {
  std::ofstream(fs::path(dir) / name) << text;
}

TEST(CheckpointListingTest, NamesCarryStepAndGeneration) {
  EXPECT_EQ(CheckpointName(120, 3), "ckpt-00000120-g3.pt");
  EXPECT_EQ(CheckpointName(120, 0), "ckpt-00000120.pt");
  EXPECT_EQ(CheckpointName(123456789, 1), "ckpt-123456789-g1.pt");
  EXPECT_EQ(StartRecordName(3), "gen-00000003.start");
  EXPECT_EQ(StartRecordText("j-000001", 3, 40),
            "baton-generation-start-v1\njob j-000001\ngeneration 3\nresumed_step 40\n");
}

TEST(CheckpointListingTest, ListsTheManagersFilesByKindInOrder) {
  const std::string dir = NewDir("kinds");
  const std::vector<std::string> names = {
      CheckpointName(20, 1), CheckpointName(10, 2), CheckpointName(10, 0),
      CheckpointName(10, 1), StartRecordName(2), StartRecordName(1),
      CheckpointName(30, 2) + ".tmp.4242", "final.pt", "ckpt-x.pt", "ckpt-00000005-g0.pt",
      "gen-00000000.start", "notes.txt"};
  for (const std::string& name : names) {
    Touch(dir, name);
  }
  absl::StatusOr<Listing> listing = ListDirectory(dir);
  ASSERT_OK(listing);
  std::vector<std::pair<int64_t, int64_t>> checkpoints;
  for (const CheckpointFile& file : listing->checkpoints) {
    checkpoints.emplace_back(file.step, file.generation);
    EXPECT_EQ(fs::path(file.path).parent_path(), fs::path(dir));
  }
  // By (step, generation); a legacy name is generation 0; "-g0" and non-numbers are not ours.
  EXPECT_THAT(checkpoints, ElementsAre(std::pair<int64_t, int64_t>{10, 0},
                                       std::pair<int64_t, int64_t>{10, 1},
                                       std::pair<int64_t, int64_t>{10, 2},
                                       std::pair<int64_t, int64_t>{20, 1}));
  EXPECT_THAT(listing->starts, ElementsAre(Field(&StartRecord::generation, 1),
                                           Field(&StartRecord::generation, 2)));
  ASSERT_EQ(listing->temporaries.size(), 1u);
  EXPECT_EQ(listing->temporaries[0].generation, 2);
  EXPECT_EQ(listing->temporaries[0].pid, 4242);
}

TEST(CheckpointListingTest, MissingDirectoryIsEmpty) {
  absl::StatusOr<Listing> listing = ListDirectory(NewDir("gone") + "/missing");
  ASSERT_OK(listing);
  EXPECT_THAT(listing->checkpoints, IsEmpty());
}

TEST(CheckpointListingTest, ReadsStartRecordsAndRejectsMalformedOnes) {
  const std::string dir = NewDir("records");
  Touch(dir, StartRecordName(2), StartRecordText("j-1", 2, 40));
  absl::StatusOr<Listing> listing = ListWithRecords(dir);
  ASSERT_OK(listing);
  ASSERT_EQ(listing->starts.size(), 1u);
  EXPECT_EQ(listing->starts[0].job, "j-1");
  EXPECT_EQ(listing->starts[0].resumed_step, 40);

  Touch(dir, StartRecordName(3), StartRecordText("j-1", 2, 40));  // Generation mismatch.
  EXPECT_THAT(ListWithRecords(dir),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("malformed start record")));
}

TEST(CheckpointListingTest, StaleAndSupersededRules) {
  const std::vector<StartRecord> starts = {{2, 40, "j-1", "gen-2"}, {3, 60, "j-1", "gen-3"}};
  // A checkpoint of an older generation beyond a newer one's resumed step is stale.
  EXPECT_EQ(StaleBy(CheckpointFile{50, 1, "a"}, starts), &starts[0]);
  EXPECT_EQ(StaleBy(CheckpointFile{40, 1, "b"}, starts), nullptr);
  EXPECT_EQ(StaleBy(CheckpointFile{70, 2, "c"}, starts), &starts[1]);
  EXPECT_EQ(StaleBy(CheckpointFile{70, 3, "d"}, starts), nullptr);
  EXPECT_THAT(StaleReason(starts[1]), HasSubstr("generation 3 started from step 60"));

  // The newest newer generation of the job supersedes; another job's record does too,
  // unless only the job's own count.
  EXPECT_EQ(SupersededBy(starts, "j-1", 1), &starts[1]);
  EXPECT_EQ(SupersededBy(starts, "j-1", 3), nullptr);
  EXPECT_EQ(SupersededBy(starts, "j-2", 9), &starts[1]);
  EXPECT_EQ(SupersededBy(starts, "j-2", 9, /*same_job_only=*/true), nullptr);
  EXPECT_THAT(Superseded(1, starts[1], "refusing"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("generation 1 is superseded by generation 3 of job j-1")));
}

}  // namespace
}  // namespace baton::trainer
