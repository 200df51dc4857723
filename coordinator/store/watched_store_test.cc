#include "coordinator/store/watched_store.h"

#include <memory>
#include <string>
#include <thread>

#include "absl/synchronization/notification.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/testing/fake_clock.h"
#include "coordinator/store/testing/faulty_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

// A write stuck in the kernel (here: held by the test) is reported once it has run past
// the limit on the clock, not before; a quick write never is.
TEST(WatchedStoreTest, AStuckWriteIsReportedAfterTheLimit) {
  absl::StatusOr<std::unique_ptr<Store>> sqlite = Store::Open(":memory:");
  ASSERT_OK(sqlite);
  auto faulty = std::make_unique<FaultyStore>(std::move(*sqlite));
  absl::Notification in_write, release;
  bool hold = false;
  faulty->SetBeforeWrite([&] {
    if (!hold) return;
    in_write.Notify();
    release.WaitForNotification();
  });
  FaultyStore* raw = faulty.get();
  FakeClock clock;
  int reports = 0;
  absl::Status report;
  WatchedStore store(std::move(faulty), &clock, absl::Seconds(40), [&](const absl::Status& s) {
    ++reports;
    report = s;
  });
  ASSERT_OK(store.SetMeta("k", "v"));  // quick
  clock.Advance(absl::Minutes(5));
  EXPECT_EQ(reports, 0);

  hold = true;
  std::thread writer([&] { EXPECT_OK(store.SetMeta("k", "w")); });
  in_write.WaitForNotification();
  clock.Advance(absl::Seconds(40));
  EXPECT_EQ(reports, 0) << "reported before the limit";
  clock.Advance(absl::Seconds(10));
  ASSERT_EQ(reports, 1);
  EXPECT_THAT(report, StatusIs(absl::StatusCode::kUnavailable, HasSubstr("Write has not returned")));
  clock.Advance(absl::Minutes(5));
  EXPECT_EQ(reports, 1) << "reported twice";
  release.Notify();
  writer.join();
  EXPECT_EQ(raw->writes(), 2);
}

}  // namespace
}  // namespace baton::coordinator
