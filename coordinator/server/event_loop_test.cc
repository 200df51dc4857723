#include "coordinator/server/event_loop.h"

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

TEST(EventLoop, RunsPostedTasksInOrderOnOneThread) {
  EventLoop loop;
  std::vector<int> order;
  std::thread::id first_thread;
  bool same_thread = true;
  absl::Notification done;
  for (int i = 0; i < 100; ++i) {
    loop.Post([&, i] {
      if (i == 0) first_thread = std::this_thread::get_id();
      same_thread &= std::this_thread::get_id() == first_thread;
      order.push_back(i);
      if (i == 99) done.Notify();
    });
  }
  done.WaitForNotification();
  ASSERT_EQ(order.size(), 100u);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(order[i], i);
  EXPECT_TRUE(same_thread);
  EXPECT_NE(first_thread, std::this_thread::get_id());
}

TEST(EventLoop, PeriodicTaskRuns) {
  EventLoop loop;
  absl::Notification ticked;
  int ticks = 0;
  loop.Every(absl::Milliseconds(1), [&] {
    if (++ticks == 3) ticked.Notify();
  });
  EXPECT_TRUE(ticked.WaitForNotificationWithTimeout(absl::Seconds(30)));
}

// A queue that never empties (every task posts the next) does not starve the periodic
// task: the reconcile that expires leases runs on time under any load.
TEST(EventLoop, PeriodicTaskRunsWhileTheQueueNeverEmpties) {
  EventLoop loop;
  std::atomic<bool> flooding{true};
  std::atomic<int64_t> flood_tasks{0};
  std::function<void()> flood = [&] {
    ++flood_tasks;
    if (flooding) loop.Post(flood);
  };
  for (int i = 0; i < 4; ++i) loop.Post(flood);
  absl::Notification ticked;
  int ticks = 0;
  loop.Every(absl::Milliseconds(1), [&] {
    if (++ticks == 3) ticked.Notify();
  });
  EXPECT_TRUE(ticked.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "the periodic task never ran behind " << flood_tasks.load() << " queued tasks";
  flooding = false;
  loop.Stop();
}

// The idle task runs once after a burst, when the queue is empty (the coordinator's group
// commit), and again after the next burst; never while tasks are queued.
TEST(EventLoop, IdleTaskRunsOnceAfterEachBurst) {
  EventLoop loop;
  absl::Notification gate;
  std::vector<int> seen;  // tasks done when the idle task ran
  int done = 0;
  absl::Notification first_idle, second_idle;
  loop.WhenIdle([&] {
    seen.push_back(done);
    if (seen.size() == 1) first_idle.Notify();
    if (seen.size() == 2) second_idle.Notify();
  });
  loop.Post([&] { gate.WaitForNotification(); });
  for (int i = 0; i < 50; ++i) loop.Post([&] { ++done; });
  gate.Notify();
  ASSERT_TRUE(first_idle.WaitForNotificationWithTimeout(absl::Seconds(30)));
  absl::Notification gate2;
  loop.Post([&] { gate2.WaitForNotification(); });
  for (int i = 0; i < 5; ++i) loop.Post([&] { ++done; });
  gate2.Notify();
  ASSERT_TRUE(second_idle.WaitForNotificationWithTimeout(absl::Seconds(30)));
  loop.Stop();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], 50);
  EXPECT_EQ(seen[1], 55);
}

TEST(EventLoop, StopDrainsQueuedTasksAndDropsLaterOnes) {
  int ran = 0;
  {
    EventLoop loop;
    absl::Notification gate;
    loop.Post([&] { gate.WaitForNotification(); });
    for (int i = 0; i < 10; ++i) loop.Post([&] { ++ran; });
    gate.Notify();
    loop.Stop();
    EXPECT_EQ(ran, 10);
    loop.Post([&] { ++ran; });
  }
  EXPECT_EQ(ran, 10);
}

}  // namespace
}  // namespace baton::coordinator
