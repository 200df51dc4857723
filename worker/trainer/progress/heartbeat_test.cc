#include "worker/trainer/progress/heartbeat.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

// Lines read from `fd` until `count` arrived or 30 s passed (a real thread writes them).
std::vector<std::string> ReadLines(int fd, size_t count) {
  std::string data;
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (absl::Now() < deadline) {
    std::vector<std::string> lines = absl::StrSplit(data, '\n', absl::SkipEmpty());
    if (lines.size() >= count && data.back() == '\n') return lines;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 100) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  return absl::StrSplit(data, '\n', absl::SkipEmpty());
}

TEST(HeartbeatTest, BeatsWhileTheTrainingThreadIsStuck) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ProgressTracker tracker(RealClock::Get());
  tracker.StepDone(3);
  tracker.Begin(TrainingPhase::kStep);
  tracker.WaitBegin();  // and never ends: the beats go on regardless
  {
    Heartbeat beat(&tracker, RealClock::Get(), fds[1], absl::Milliseconds(5));
    const std::vector<std::string> lines = ReadLines(fds[0], 3);
    ASSERT_GE(lines.size(), 3u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(
          lines[i].rfind("{\"beat\":" + std::to_string(i + 1) + ",\"step\":3,\"phase\":1,", 0), 0u)
          << lines[i];
      EXPECT_NE(lines[i].find("\"waiting\":1"), std::string::npos) << lines[i];
    }
  }
  ::close(fds[1]);
  ::close(fds[0]);
}

TEST(HeartbeatTest, NoDescriptorOrNoIntervalNoThread) {
  ProgressTracker tracker(RealClock::Get());
  Heartbeat none(&tracker, RealClock::Get(), -1, absl::Milliseconds(5));
  Heartbeat off(&tracker, RealClock::Get(), 2, absl::ZeroDuration());
}

TEST(HeartbeatTest, AClosedReaderEndsTheBeatsQuietly) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  ProgressTracker tracker(RealClock::Get());
  signal(SIGPIPE, SIG_IGN);
  Heartbeat beat(&tracker, RealClock::Get(), fds[1], absl::Milliseconds(1));
  // Joins in the destructor: the thread returned at its first failed write.
  ::close(fds[1]);
}

}  // namespace
}  // namespace baton::trainer
