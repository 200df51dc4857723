#include "worker/process/child_reaper.h"

#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/testing/process_test_util.h"

namespace baton::worker {
namespace {

using ::testing::Contains;
using ::testing::Not;

// True once no process `pid` exists, not even as a zombie; reaps nothing itself.
bool NoSuchProcess(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

// True while `pid` is a zombie (exited, not reaped).
bool IsZombie(pid_t pid) {
  siginfo_t info{};
  return ::waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid == pid;
}

// Forks a child that forks a grandchild exiting with 0 and exits itself; the grandchild is
// reparented to this process (a subreaper). Reaps the child; returns the grandchild's pid
// once it is a zombie of ours.
pid_t MakeOrphanZombie() {
  int report[2], go[2];  // The grandchild's pid up; "exit now" down.
  if (::pipe(report) != 0 || ::pipe(go) != 0) return -1;
  const pid_t child = ::fork();
  if (child == 0) {
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      char c;
      (void)!::read(go[0], &c, 1);  // Until the child is gone and we are reparented.
      ::_exit(0);
    }
    (void)!::write(report[1], &grandchild, sizeof(grandchild));
    ::_exit(0);
  }
  pid_t grandchild = -1;
  (void)!::read(report[0], &grandchild, sizeof(grandchild));
  ::waitpid(child, nullptr, 0);
  (void)!::write(go[1], "x", 1);
  for (int fd : {report[0], report[1], go[0], go[1]}) ::close(fd);
  WaitUntil([&] { return IsZombie(grandchild) || NoSuchProcess(grandchild); });
  return grandchild;
}

class ChildReaperTest : public ::testing::Test {
 protected:
  void SetUp() override { BecomeSubreaper(); }
  ChildRegistry registry_;
};

TEST_F(ChildReaperTest, ReapsOrphansButLeavesARegisteredChildsExitToItsOwner) {
  const pid_t owned = registry_.ForkRegistered([] {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(7);
    return pid;
  });
  ASSERT_GT(owned, 0);
  ASSERT_TRUE(WaitUntil([&] { return IsZombie(owned); }));
  const pid_t orphan = MakeOrphanZombie();
  ASSERT_GT(orphan, 0);
  ASSERT_TRUE(IsZombie(orphan));

  const std::vector<pid_t> reaped = registry_.ReapOrphans();
  EXPECT_THAT(reaped, Contains(orphan));
  EXPECT_THAT(reaped, Not(Contains(owned)));
  EXPECT_TRUE(NoSuchProcess(orphan));
  int status = 0;
  ASSERT_EQ(::waitpid(owned, &status, 0), owned);  // Its owner still gets its status.
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7);
  registry_.Release(owned);
}

TEST_F(ChildReaperTest, ReleasedChildrenAreReapedLikeOrphans) {
  const pid_t given_up = registry_.ForkRegistered([] {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(0);
    return pid;
  });
  ASSERT_TRUE(WaitUntil([&] { return IsZombie(given_up); }));
  EXPECT_THAT(registry_.ReapOrphans(), Not(Contains(given_up)));
  registry_.Release(given_up);
  EXPECT_THAT(registry_.ReapOrphans(), Contains(given_up));
  EXPECT_TRUE(NoSuchProcess(given_up));
}

TEST_F(ChildReaperTest, TheReaperThreadReapsOrphansAsTheyExit) {
  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ASSERT_EQ(::pthread_sigmask(SIG_BLOCK, &chld, nullptr), 0);  // Before the thread starts.
  {
    OrphanReaper reaper(&registry_);
    reaper.Start();
    const pid_t orphan = MakeOrphanZombie();
    ASSERT_GT(orphan, 0);
    EXPECT_TRUE(WaitUntil([&] { return NoSuchProcess(orphan); }));
  }
  ::pthread_sigmask(SIG_UNBLOCK, &chld, nullptr);
}

}  // namespace
}  // namespace baton::worker
