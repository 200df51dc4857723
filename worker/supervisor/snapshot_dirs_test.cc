#include "worker/supervisor/snapshot_dirs.h"

#include <stdlib.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "common/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

class SnapshotDirsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/snapshot_dirs_test.XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    root_ = std::string(tmpl) + "/snapshots";
  }
  void TearDown() override {
    std::filesystem::remove_all(std::filesystem::path(root_).parent_path());
  }
  bool Exists(const std::string& job) { return std::filesystem::exists(root_ + "/" + job); }

  std::string root_;
  const absl::Time t0_ = absl::FromUnixSeconds(1000);
};

// A job's directory is named by its id and creation time: a job with the same id from
// another coordinator (ids are unique within one coordinator's state) gets another one.
TEST_F(SnapshotDirsTest, ADirectoryIsNamedByTheJobsIdAndCreationTime) {
  EXPECT_EQ(SnapshotDirs::DirName("j-000002", absl::FromUnixNanos(1733390000123456789)),
            "j-000002.1733390000123456789");
  EXPECT_NE(SnapshotDirs::DirName("j-000002", absl::FromUnixSeconds(1)),
            SnapshotDirs::DirName("j-000002", absl::FromUnixSeconds(2)));
  EXPECT_EQ(SnapshotDirs::DirName("j-000002", absl::InfinitePast()), "j-000002");
}

TEST_F(SnapshotDirsTest, UseMakesAPrivateDirectoryKeptWhileInUse) {
  SnapshotDirs dirs({root_, absl::Minutes(10), 4});
  ASSERT_OK_AND_ASSIGN(const std::string dir, dirs.Use("j-1"));
  EXPECT_EQ(dir, root_ + "/j-1");
  struct stat st;
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700);
  std::ofstream(dir + "/snapshot-rank0.bin") << "x";
  dirs.Collect(t0_ + absl::Hours(5));  // In use: never removed.
  EXPECT_TRUE(Exists("j-1"));
}

// An idle directory survives a restart within keep_idle (its snapshots are what the next
// generation restores) and goes after it.
TEST_F(SnapshotDirsTest, IdleDirectoriesGoAfterKeepIdle) {
  SnapshotDirs dirs({root_, absl::Minutes(10), 4});
  ASSERT_OK(dirs.Use("j-1").status());
  dirs.Idle("j-1", t0_);
  dirs.Collect(t0_ + absl::Minutes(9));
  EXPECT_TRUE(Exists("j-1"));
  ASSERT_OK(dirs.Use("j-1").status());  // Placed here again: in use, not idle.
  dirs.Collect(t0_ + absl::Minutes(30));
  EXPECT_TRUE(Exists("j-1"));
  dirs.Idle("j-1", t0_ + absl::Minutes(30));
  dirs.Collect(t0_ + absl::Minutes(40));
  EXPECT_FALSE(Exists("j-1"));
  EXPECT_EQ(dirs.idle_count(), 0u);
}

TEST_F(SnapshotDirsTest, AtMostMaxIdleOldestFirst) {
  SnapshotDirs dirs({root_, absl::Minutes(10), 2});
  for (int i = 1; i <= 4; ++i) {
    const std::string job = "j-" + std::to_string(i);
    ASSERT_OK(dirs.Use(job).status());
    dirs.Idle(job, t0_ + absl::Seconds(i));
  }
  dirs.Collect(t0_ + absl::Seconds(5));
  EXPECT_FALSE(Exists("j-1"));
  EXPECT_FALSE(Exists("j-2"));
  EXPECT_TRUE(Exists("j-3"));
  EXPECT_TRUE(Exists("j-4"));
}

// Directories an earlier run of the worker left count as idle from the first Collect.
TEST_F(SnapshotDirsTest, LeftoversOfAnEarlierRunAreCollected) {
  std::filesystem::create_directories(root_ + "/j-old");
  SnapshotDirs dirs({root_, absl::Minutes(10), 4});
  dirs.Collect(t0_);
  EXPECT_TRUE(Exists("j-old"));
  dirs.Collect(t0_ + absl::Minutes(11));
  EXPECT_FALSE(Exists("j-old"));
}

TEST_F(SnapshotDirsTest, DisabledWithoutARoot) {
  SnapshotDirs dirs({"", absl::Minutes(10), 4});
  EXPECT_FALSE(dirs.enabled());
  dirs.Collect(t0_);  // Nothing to do, nothing touched.
}

}  // namespace
}  // namespace baton::worker
