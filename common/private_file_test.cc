#include "common/private_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

unsigned ModeOf(const std::string& path) {
  struct stat st;
  return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 07777;
}

class PrivateFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* base = std::getenv("TEST_TMPDIR");
    dir_ = std::string(base != nullptr ? base : "/tmp") + "/private-XXXXXX";
    ASSERT_NE(::mkdtemp(dir_.data()), nullptr);
    old_umask_ = ::umask(0);  // The widest umask: the modes must not depend on it.
  }
  void TearDown() override { ::umask(old_umask_); }
  std::string dir_;
  mode_t old_umask_ = 0;
};

TEST_F(PrivateFileTest, CreatedDirectoriesAre0700WhateverTheUmask) {
  ASSERT_OK(MakePrivateDirs(dir_ + "/a/b/c"));
  EXPECT_EQ(ModeOf(dir_ + "/a"), 0700u);
  EXPECT_EQ(ModeOf(dir_ + "/a/b"), 0700u);
  EXPECT_EQ(ModeOf(dir_ + "/a/b/c"), 0700u);
  ASSERT_OK(MakePrivateDirs(dir_ + "/a/b/c"));  // Existing: fine.
}

TEST_F(PrivateFileTest, ASymlinkIsNotAcceptedAsTheDirectory) {
  ASSERT_EQ(::symlink(dir_.c_str(), (dir_ + "/link").c_str()), 0);
  EXPECT_THAT(MakePrivateDirs(dir_ + "/link"),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("link")));
}

TEST_F(PrivateFileTest, OpenPrivateCreates0600AndNeverFollowsASymlink) {
  const int fd = OpenPrivate(dir_ + "/log", O_WRONLY | O_CREAT | O_APPEND);
  ASSERT_GE(fd, 0);
  ::close(fd);
  EXPECT_EQ(ModeOf(dir_ + "/log"), 0600u);
  ASSERT_EQ(::symlink((dir_ + "/victim").c_str(), (dir_ + "/planted").c_str()), 0);
  EXPECT_LT(OpenPrivate(dir_ + "/planted", O_WRONLY | O_CREAT | O_APPEND), 0);
  EXPECT_EQ(errno, ELOOP);
  EXPECT_EQ(::access((dir_ + "/victim").c_str(), F_OK), -1);  // Not created through it.
}

TEST_F(PrivateFileTest, CreateExclusiveReplacesWhatIsInTheWayWithoutFollowingIt) {
  const std::string victim = dir_ + "/victim";
  const int v = OpenPrivate(victim, O_WRONLY | O_CREAT);
  ASSERT_GE(v, 0);
  ASSERT_EQ(::write(v, "keep", 4), 4);
  ::close(v);
  ASSERT_EQ(::symlink(victim.c_str(), (dir_ + "/tmp").c_str()), 0);
  absl::StatusOr<int> fd = CreateExclusive(dir_ + "/tmp");
  ASSERT_OK(fd);
  ASSERT_EQ(::write(*fd, "new", 3), 3);
  ::close(*fd);
  EXPECT_EQ(ModeOf(dir_ + "/tmp"), 0600u);  // A regular file now, not the symlink.
  struct stat st;
  ASSERT_EQ(::stat(victim.c_str(), &st), 0);
  EXPECT_EQ(st.st_size, 4);  // Untouched.
}

}  // namespace
}  // namespace baton
