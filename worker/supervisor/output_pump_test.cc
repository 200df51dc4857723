#include "worker/supervisor/output_pump.h"

#include <fcntl.h>
#include <poll.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/private_file.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/testing/fake_process_launcher.h"
#include "worker/testing/process_test_util.h"

namespace baton::worker {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

baton::v1::ProcessExit Exit(int code) {
  baton::v1::ProcessExit e;
  e.set_exit_code(code);
  return e;
}

// The pump's callbacks as one ordered list of events ("log:TEXT", "metric:STEP",
// "exit:RANK:CODE"), with what they carried. Thread-safe.
class Recorder {
 public:
  OutputPumpCallbacks callbacks() {
    return OutputPumpCallbacks{
        [this](const std::string& job_id, baton::v1::LogLine line) {
          absl::MutexLock lock(&mu_);
          events_.push_back(absl::StrCat("log:", line.text()));
          jobs_.push_back(job_id);
          lines_.push_back(std::move(line));
        },
        [this](const std::string& job_id, baton::v1::MetricPoint point) {
          absl::MutexLock lock(&mu_);
          events_.push_back(absl::StrCat("metric:", point.step()));
          jobs_.push_back(job_id);
          points_.push_back(std::move(point));
        },
        [this](const PumpedRank& rank, const baton::v1::ProcessExit& exit) {
          absl::MutexLock lock(&mu_);
          events_.push_back(absl::StrCat("exit:", rank.rank, ":", exit.exit_code()));
          jobs_.push_back(rank.job_id);
        }};
  }
  std::vector<std::string> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  std::vector<std::string> jobs() const {
    absl::MutexLock lock(&mu_);
    return jobs_;
  }
  std::vector<baton::v1::LogLine> lines() const {
    absl::MutexLock lock(&mu_);
    return lines_;
  }
  std::vector<baton::v1::MetricPoint> points() const {
    absl::MutexLock lock(&mu_);
    return points_;
  }
  // Waits (real time, up to 10 s) until `event` was recorded.
  bool WaitFor(const std::string& event) const {
    return WaitUntil([&] {
      const std::vector<std::string> e = events();
      return std::find(e.begin(), e.end(), event) != e.end();
    });
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> jobs_ ABSL_GUARDED_BY(mu_);
  std::vector<baton::v1::LogLine> lines_ ABSL_GUARDED_BY(mu_);
  std::vector<baton::v1::MetricPoint> points_ ABSL_GUARDED_BY(mu_);
};

class OutputPumpTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = MakeTestDir("output-pump"); }

  void StartPump(OutputPumpOptions options) {
    pump_ = std::make_unique<OutputPump>(options, &clock_, recorder_.callbacks());
    ASSERT_TRUE(pump_->Start().ok());
  }

  // Rank `rank` of job "j" gen 3, run by `p`; its stdout and stderr go to
  // <dir>/rank-R.stdout and .stderr.
  RankPipes PipesOf(const std::shared_ptr<FakeProcess>& p, int32_t rank) {
    RankPipes pipes;
    pipes.rank = PumpedRank{"j", 3, rank};
    pipes.process = p;
    pipes.stdout_fd = p->TakeStdoutReader();
    pipes.stderr_fd = p->TakeStderrReader();
    pipes.metrics_fd = p->TakeMetricsReader();
    pipes.stdout_log = UniqueFd(OpenPrivate(LogPath(rank, "stdout"), O_WRONLY | O_CREAT));
    pipes.stderr_log = UniqueFd(OpenPrivate(LogPath(rank, "stderr"), O_WRONLY | O_CREAT));
    return pipes;
  }
  std::string LogPath(int32_t rank, const std::string& stream) const {
    return absl::StrCat(dir_, "/rank-", rank, ".", stream);
  }

  std::string dir_;
  FakeClock clock_;
  Recorder recorder_;
  std::unique_ptr<OutputPump> pump_;
};

TEST_F(OutputPumpTest, RelaysLinesAndMetricsToTheLogsAndCallbacksThenTheExitAfterThem) {
  OutputPumpOptions o;
  o.max_line_bytes = 64;
  StartPump(o);
  auto p = std::make_shared<FakeProcess>(100);
  pump_->Add(PipesOf(p, 1));
  p->WriteMetrics(R"({"step":7,"loss":0.25})"
                  "\n");
  p->WriteMetrics("garbage\n");
  p->WriteMetrics(std::string(100, 'x') + "\n");  // Longer than max_line_bytes.
  p->WriteMetrics(R"({"step":8,"loss":0.2})"
                  "\n");
  p->WriteStderr("warn\n");
  p->WriteStdout("hello\nlast words");  // Unterminated: handed on at EOF.
  p->Exit(Exit(3));
  ASSERT_TRUE(recorder_.WaitFor("exit:1:3"));

  const std::vector<std::string> events = recorder_.events();
  EXPECT_EQ(events.back(), "exit:1:3");  // After every line.
  EXPECT_THAT(events, Contains("log:hello"));
  EXPECT_THAT(events, Contains("log:last words"));
  EXPECT_THAT(events, Contains("log:warn"));
  EXPECT_EQ(events.size(), 6u);  // 3 lines, 2 points, the exit.
  EXPECT_THAT(recorder_.jobs(), ::testing::Each("j"));
  const std::vector<baton::v1::MetricPoint> points = recorder_.points();
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].step(), 7);
  EXPECT_EQ(points[0].values().at("loss"), 0.25);
  EXPECT_EQ(points[0].generation(), 3);
  EXPECT_EQ(points[0].rank(), 1);
  EXPECT_EQ(FromProto(points[0].time()), clock_.Now());
  EXPECT_EQ(points[1].step(), 8);
  for (const baton::v1::LogLine& l : recorder_.lines()) {
    EXPECT_EQ(l.generation(), 3);
    EXPECT_EQ(l.rank(), 1);
    EXPECT_EQ(FromProto(l.time()), clock_.Now());
    EXPECT_EQ(l.stream(), l.text() == "warn" ? baton::v1::LogLine::STREAM_STDERR
                                             : baton::v1::LogLine::STREAM_STDOUT);
  }
  EXPECT_EQ(ReadFileOrEmpty(LogPath(1, "stdout")), "hello\nlast words");
  EXPECT_EQ(ReadFileOrEmpty(LogPath(1, "stderr")), "warn\n");
}

// Two ranks: one's exit waits for none of the other's pipes.
TEST_F(OutputPumpTest, EachExitWaitsForItsOwnRanksPipesOnly) {
  StartPump(OutputPumpOptions());
  auto running = std::make_shared<FakeProcess>(100);
  auto exiting = std::make_shared<FakeProcess>(101);
  pump_->Add(PipesOf(running, 0));
  pump_->Add(PipesOf(exiting, 1));
  exiting->WriteStdout("bye\n");
  exiting->Exit(Exit(0));
  ASSERT_TRUE(recorder_.WaitFor("exit:1:0"));
  running->WriteStdout("still here\n");
  ASSERT_TRUE(recorder_.WaitFor("log:still here"));
  EXPECT_THAT(recorder_.events(), ElementsAre("log:bye", "exit:1:0", "log:still here"));
}

// A rank that exited while something it left behind holds its pipes is published once the
// drain timeout passes on the clock.
TEST_F(OutputPumpTest, AnExitWhosePipesStayOpenIsPublishedAfterTheDrainTimeout) {
  StartPump(OutputPumpOptions());  // A drain timeout of 2 s.
  auto p = std::make_shared<FakeProcess>(100);
  pump_->Add(PipesOf(p, 0));
  p->WriteStdout("partial");
  p->ExitLeavingPipesOpen(Exit(0));
  // The thread collected the exit once it armed the drain deadline.
  ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + absl::Seconds(2)));
  clock_.Advance(absl::Seconds(2) - absl::Nanoseconds(1));
  EXPECT_THAT(recorder_.events(), IsEmpty());
  clock_.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(recorder_.WaitFor("exit:0:0"));
  EXPECT_THAT(recorder_.events(), ElementsAre("log:partial", "exit:0:0"));
}

// A rank that prints without end: its log file keeps max_rank_log_bytes and a marker, and
// at most max_rank_log_lines_per_second lines a second are relayed, then one marker saying
// how many were not.
TEST_F(OutputPumpTest, ARanksOutputIsBoundedOnDiskAndInRate) {
  OutputPumpOptions o;
  o.max_rank_log_bytes = 40;
  o.max_rank_log_lines_per_second = 3;
  StartPump(o);
  auto p = std::make_shared<FakeProcess>(100);
  pump_->Add(PipesOf(p, 0));
  std::string burst;
  for (int i = 0; i < 8; ++i) absl::StrAppend(&burst, "line ", i, "\n");  // 7 bytes each
  p->WriteStderr(burst);
  ASSERT_TRUE(WaitUntil([&] { return pump_->dropped_log_lines() == 5; }));
  clock_.Advance(absl::Seconds(1));
  p->WriteStderr("next second\n");
  p->Exit(Exit(0));
  ASSERT_TRUE(recorder_.WaitFor("exit:0:0"));

  EXPECT_THAT(recorder_.events(),
              ElementsAre("log:line 0", "log:line 1", "log:line 2",
                          "log:[baton: 5 more line(s) of this rank's stderr were not relayed: "
                          "over the worker's --max_rank_log_lines_per_second=3; the rank's log "
                          "file on the worker has them, up to --max_rank_log_bytes]",
                          "log:next second", "exit:0:0"));
  EXPECT_EQ(ReadFileOrEmpty(LogPath(0, "stderr")),
            absl::StrCat(burst.substr(0, 40),
                         "\n[baton: this log reached its limit of 40 bytes (the worker's "
                         "--max_rank_log_bytes); the rank's further output is not kept here]\n"));
  EXPECT_EQ(pump_->capped_rank_logs(), 1);  // stderr; stdout stayed empty.
}

// Stop hands on each stream's unfinished last line and publishes no exit; pipes added after
// it stay open, unread, until the pump is destroyed.
TEST_F(OutputPumpTest, StopHandsOnUnfinishedLinesAndLaterPipesAreKeptUnread) {
  StartPump(OutputPumpOptions());
  auto p = std::make_shared<FakeProcess>(100);
  pump_->Add(PipesOf(p, 0));
  p->WriteStdout("first\nunfinished");
  ASSERT_TRUE(recorder_.WaitFor("log:first"));
  // Once "first" is relayed, "unfinished" was read with it.
  pump_->Stop();
  EXPECT_THAT(recorder_.events(), ElementsAre("log:first", "log:unfinished"));
  pump_->Stop();  // Idempotent.

  UniqueFd read_end, write_end;
  ASSERT_TRUE(MakePipe(&read_end, &write_end, O_NONBLOCK).ok());
  RankPipes late;
  late.rank = PumpedRank{"j", 3, 1};
  late.process = std::make_shared<FakeProcess>(101);
  late.stdout_fd = std::move(read_end);
  pump_->Add(std::move(late));
  struct pollfd pfd = {write_end.get(), POLLOUT, 0};
  ASSERT_EQ(::poll(&pfd, 1, 0), 1);
  EXPECT_EQ(pfd.revents & POLLERR, 0) << "the late stdout pipe was closed";
  pump_.reset();
  ASSERT_EQ(::poll(&pfd, 1, 0), 1);
  EXPECT_NE(pfd.revents & POLLERR, 0) << "the late stdout pipe outlived the pump";
  EXPECT_THAT(recorder_.events(), ElementsAre("log:first", "log:unfinished"));
}

}  // namespace
}  // namespace baton::worker
