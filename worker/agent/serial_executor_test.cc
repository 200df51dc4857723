#include "worker/agent/serial_executor.h"

#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

TEST(SerialExecutorTest, RunsClosuresInOrderOffThePostingThreadAndStopRunsWhatIsQueued) {
  SerialExecutor executor;
  executor.Start();
  absl::Notification release;
  std::vector<int> ran;  // Written by the executor's thread only, read after Stop().
  ASSERT_TRUE(executor.Post([&] { release.WaitForNotification(); }));
  // Post() does not wait for the closure in progress.
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(executor.Post([&ran, i] { ran.push_back(i); }));
  release.Notify();
  executor.Stop();
  EXPECT_EQ(ran, (std::vector<int>{0, 1, 2}));
  EXPECT_FALSE(executor.Post([] {}));
  executor.Stop();  // idempotent
}

TEST(SerialExecutorTest, RefusesMoreThanItsBound) {
  SerialExecutor executor(/*max_queued=*/2);  // Not started: nothing runs.
  EXPECT_TRUE(executor.Post([] {}));
  EXPECT_TRUE(executor.Post([] {}));
  EXPECT_FALSE(executor.Post([] {}));
}

}  // namespace
}  // namespace baton::worker
