#include "coordinator/server/path_checker.h"

#include <memory>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

// A check stuck in the kernel (a hung mount) holds its thread only: other checks go on,
// the queue is bounded, and a destroyed checker runs no more callbacks.
TEST(PathCheckerTest, AHungCheckStallsOnlyItsThread) {
  auto release = std::make_shared<absl::Notification>();
  auto checker = std::make_unique<PathChecker>(
      [release](const baton::v1::JobSpec& spec) {
        if (spec.name() == "hung") release->WaitForNotification();
        return absl::OkStatus();
      },
      /*threads=*/2, /*max_pending=*/3);
  absl::Notification hung_done;
  ASSERT_TRUE(checker->Check([] {
    baton::v1::JobSpec s;
    s.set_name("hung");
    return s;
  }(), [&](absl::Status) { hung_done.Notify(); }));
  absl::Notification ok_done;
  absl::Status ok_status = absl::UnknownError("not run");
  ASSERT_TRUE(checker->Check(baton::v1::JobSpec(), [&](absl::Status s) {
    ok_status = s;
    ok_done.Notify();
  }));
  ASSERT_TRUE(ok_done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_TRUE(ok_status.ok());

  // The bound: one stuck + two queued behind a second stuck one = 3 pending.
  baton::v1::JobSpec hung;
  hung.set_name("hung");
  ASSERT_TRUE(checker->Check(hung, [](absl::Status) {}));
  ASSERT_TRUE(checker->Check(hung, [](absl::Status) {}));
  EXPECT_FALSE(checker->Check(hung, [](absl::Status) {})) << "unbounded";

  checker.reset();  // returns although two checks are stuck
  EXPECT_FALSE(hung_done.HasBeenNotified());
  release->Notify();  // the stuck threads finish; their callbacks are dropped
}

}  // namespace
}  // namespace baton::coordinator
