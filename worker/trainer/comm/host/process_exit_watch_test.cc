#include "worker/trainer/comm/host/process_exit_watch.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

// A child that waits until killed.
pid_t SpawnSleeper() {
  const pid_t pid = fork();
  if (pid == 0) {
    for (;;) pause();
  }
  return pid;
}

// Records the indices on_exit was called with.
class ExitLog {
 public:
  void Add(int index) {
    absl::MutexLock lock(&mu_);
    seen_.push_back(index);
  }
  // Waits (up to a deadline far beyond any poll: the test then fails) for `n` calls.
  std::vector<int> WaitFor(size_t n) {
    absl::MutexLock lock(&mu_);
    const auto enough = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) { return seen_.size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), absl::Seconds(60));
    return seen_;
  }

 private:
  absl::Mutex mu_;
  std::vector<int> seen_ ABSL_GUARDED_BY(mu_);
};

// The exit of a SIGKILLed process is seen while it is still a zombie (kill(pid, 0) would
// call it alive), once, at its own index; the live one and the unwatched index are not.
TEST(ProcessExitWatchTest, SeesAKilledProcessBeforeItIsReaped) {
  const pid_t alive = SpawnSleeper();
  const pid_t killed = SpawnSleeper();
  ASSERT_GT(alive, 0);
  ASSERT_GT(killed, 0);
  ExitLog log;
  {
    ProcessExitWatch watch({alive, 0, killed}, [&](int i) { log.Add(i); });
    EXPECT_FALSE(watch.AnyExited());
    ASSERT_EQ(kill(killed, SIGKILL), 0);
    EXPECT_EQ(log.WaitFor(1), std::vector<int>{2});
    EXPECT_TRUE(watch.Exited(2));
    EXPECT_TRUE(watch.AnyExited());
    EXPECT_FALSE(watch.Exited(0));
    EXPECT_FALSE(watch.Exited(1));
    EXPECT_FALSE(watch.Exited(3));
    EXPECT_FALSE(watch.Exited(-1));
    EXPECT_EQ(kill(killed, 0), 0) << "not reaped yet: still a zombie";
  }
  EXPECT_EQ(log.WaitFor(1), std::vector<int>{2}) << "no call after the watch is destroyed";
  for (pid_t pid : {alive, killed}) {
    kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
  }
}

// A process already gone when the watch starts counts as exited at once.
TEST(ProcessExitWatchTest, AProcessGoneBeforeTheWatchExitedAtOnce) {
  const pid_t gone = SpawnSleeper();
  ASSERT_GT(gone, 0);
  ASSERT_EQ(kill(gone, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(gone, &status, 0), gone);
  ExitLog log;
  ProcessExitWatch watch({gone}, [&](int i) { log.Add(i); });
  EXPECT_EQ(log.WaitFor(1), std::vector<int>{0});
  EXPECT_TRUE(watch.Exited(0));
}

// Destroying a watch whose processes all live returns (the thread ends).
TEST(ProcessExitWatchTest, DestructionEndsTheWatch) {
  const pid_t alive = SpawnSleeper();
  ASSERT_GT(alive, 0);
  {
    ProcessExitWatch watch({alive}, [](int) { ADD_FAILURE() << "no exit happened"; });
  }
  kill(alive, SIGKILL);
  int status = 0;
  ASSERT_EQ(waitpid(alive, &status, 0), alive);
}

}  // namespace
}  // namespace baton::trainer
