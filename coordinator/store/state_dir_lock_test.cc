#include "coordinator/store/state_dir_lock.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

TEST(StateDirLockTest, OneHolderAtATimeAndReleasedOnExit) {
  const std::string dir = getenv("TEST_TMPDIR");
  // Another process takes the lock and waits for us to read a byte from it.
  int to_parent[2], to_child[2];
  ASSERT_EQ(pipe(to_parent), 0);
  ASSERT_EQ(pipe(to_child), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    auto lock = StateDirLock::Acquire(dir);
    const char ok = lock.ok() ? 'y' : 'n';
    (void)!write(to_parent[1], &ok, 1);
    char c;
    (void)!read(to_child[0], &c, 1);
    _exit(0);  // the kernel releases the lock
  }
  char ok = 0;
  ASSERT_EQ(read(to_parent[0], &ok, 1), 1);
  ASSERT_EQ(ok, 'y');

  EXPECT_THAT(
      StateDirLock::Acquire(dir),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               HasSubstr(absl::StrCat("in use by another baton-coordinator (pid ", child, ")"))));
  ASSERT_EQ(write(to_child[1], "x", 1), 1);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);

  absl::StatusOr<std::unique_ptr<StateDirLock>> mine = StateDirLock::Acquire(dir);
  ASSERT_OK(mine);
  // Held within this process too: a second server in one process is refused.
  EXPECT_THAT(StateDirLock::Acquire(dir),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(absl::StrCat("(pid ", getpid(), ")"))));
  mine->reset();
  EXPECT_OK(StateDirLock::Acquire(dir));
}

TEST(StateDirLockTest, AMissingDirectoryIsUnavailable) {
  EXPECT_THAT(StateDirLock::Acquire(std::string(getenv("TEST_TMPDIR")) + "/no/such/dir"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no/such/dir/LOCK")));
}

}  // namespace
}  // namespace baton::coordinator
