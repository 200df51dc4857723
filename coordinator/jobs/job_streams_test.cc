#include "coordinator/jobs/job_streams.h"

#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "coordinator/store/store.h"
#include "coordinator/testing/recording_sink.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

class JobStreamsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
    ASSERT_OK(store);
    store_ = std::move(*store);
    streams_ = std::make_unique<JobStreams>(
        store_.get(),
        [](const std::string& id) {
          baton::v1::Job job;
          job.set_id(id);
          return job;
        },
        /*page=*/10);
  }
  // Commits updates seq next_..next_+n-1 of job "j" and publishes them, as JobManager does.
  void Commit(int n) {
    std::vector<baton::v1::JobUpdate> updates;
    for (int i = 0; i < n; ++i) {
      baton::v1::JobUpdate u;
      u.set_seq(next_++);
      u.mutable_metric()->set_step(u.seq());
      updates.push_back(u);
    }
    ASSERT_OK(store_->AppendUpdates("j", updates));
    streams_->Publish("j", updates);
  }
  static std::vector<int64_t> Seqs(const RecordingSink<baton::v1::JobUpdate>& sink) {
    std::vector<int64_t> seqs;
    for (const auto& u : sink.items) {
      if (!u.has_snapshot()) seqs.push_back(u.seq());
    }
    return seqs;
  }

  std::unique_ptr<Store> store_;
  std::unique_ptr<JobStreams> streams_;
  int64_t next_ = 1;
};

// A long history goes out a page at a time, only while the client keeps up; updates
// committed meanwhile arrive exactly once, in order.
TEST_F(JobStreamsTest, HistoryInPagesAsTheClientReads) {
  Commit(95);
  auto sink = std::make_shared<RecordingSink<baton::v1::JobUpdate>>();
  sink->backlogged = true;  // the client is slow from the start
  ASSERT_OK(streams_->Watch("j", 0, /*ended=*/false, sink));
  EXPECT_EQ(sink->items.size(), 1u) << "only the snapshot while backlogged";
  EXPECT_EQ(streams_->catching_up(), 1u);

  Commit(3);  // 96..98 while catching up: read later from the store, not pushed now
  EXPECT_EQ(sink->items.size(), 1u);
  sink->backlogged = false;
  streams_->Pump();  // up to 8 pages of 10
  EXPECT_EQ(Seqs(*sink).size(), 80u);
  streams_->Pump();
  EXPECT_EQ(streams_->catching_up(), 0u);
  Commit(2);  // live now
  std::vector<int64_t> want(100);
  for (int i = 0; i < 100; ++i) want[i] = i + 1;
  EXPECT_EQ(Seqs(*sink), want);
  EXPECT_FALSE(sink->finished);
}

// An events-only watch (the coordinator's metrics) gets the events, from history and live,
// and never a metric point.
TEST_F(JobStreamsTest, AnEventsOnlyWatchSkipsMetricPoints) {
  const auto commit_event = [&](const std::string& reason) {
    baton::v1::JobUpdate u;
    u.set_seq(next_++);
    u.mutable_event()->set_reason(reason);
    u.mutable_event()->set_to_state(baton::v1::JOB_STATE_RUNNING);
    ASSERT_OK(store_->AppendUpdates("j", {u}));
    streams_->Publish("j", {u});
  };
  Commit(25);            // 1..25: metric points
  commit_event("Early");  // 26
  auto sink = std::make_shared<RecordingSink<baton::v1::JobUpdate>>();
  ASSERT_OK(streams_->Watch("j", 0, /*ended=*/false, sink, /*events_only=*/true));
  streams_->Pump();
  Commit(5);             // 27..31, live
  commit_event("Late");  // 32
  std::vector<std::string> reasons;
  for (const auto& u : sink->items) {
    EXPECT_FALSE(u.has_metric()) << u.seq();
    if (u.has_event()) reasons.push_back(u.event().reason());
  }
  EXPECT_THAT(reasons, ::testing::ElementsAre("Early", "Late"));
}

TEST_F(JobStreamsTest, AnEndedJobFinishesOnceCaughtUp) {
  Commit(25);
  auto sink = std::make_shared<RecordingSink<baton::v1::JobUpdate>>();
  sink->backlogged = true;
  ASSERT_OK(streams_->Watch("j", 5, /*ended=*/false, sink));
  streams_->End("j");
  EXPECT_FALSE(sink->finished) << "finished before it got the history";
  sink->backlogged = false;
  streams_->Pump();
  EXPECT_TRUE(sink->finished);
  EXPECT_EQ(Seqs(*sink).size(), 20u);
  EXPECT_EQ(Seqs(*sink).front(), 6);
}

TEST_F(JobStreamsTest, LogsOfOneRankInPages) {
  std::vector<baton::v1::LogLine> lines;
  for (int i = 1; i <= 30; ++i) {
    baton::v1::LogLine line;
    line.set_seq(i);
    line.set_rank(i % 2);
    lines.push_back(line);
  }
  ASSERT_OK(store_->AppendLogs("j", lines));
  auto sink = std::make_shared<RecordingSink<baton::v1::LogLine>>();
  LogQuery query;
  query.rank = 1;
  ASSERT_OK(streams_->Follow("j", query, /*ended=*/false, sink));
  ASSERT_EQ(sink->items.size(), 15u);
  for (const auto& line : sink->items) EXPECT_EQ(line.rank(), 1);
  EXPECT_TRUE(sink->finished);
}

// Lines seq 1..n, rank seq % 2, written at second seq (Unix time).
std::vector<baton::v1::LogLine> TimedLines(int first, int last) {
  std::vector<baton::v1::LogLine> lines;
  for (int i = first; i <= last; ++i) {
    baton::v1::LogLine line;
    line.set_seq(i);
    line.set_rank(i % 2);
    line.mutable_time()->set_seconds(i);
    lines.push_back(line);
  }
  return lines;
}

std::vector<int64_t> LineSeqs(const RecordingSink<baton::v1::LogLine>& sink) {
  std::vector<int64_t> seqs;
  for (const auto& line : sink.items) seqs.push_back(line.seq());
  return seqs;
}

// `tail` counts only the lines the other filters keep: the last 3 of rank 1 among 30
// lines, across pages, is 25, 27, 29; then, with follow, every new line of rank 1.
TEST_F(JobStreamsTest, TailOfOneRankThenLiveLines) {
  ASSERT_OK(store_->AppendLogs("j", TimedLines(1, 30)));
  auto sink = std::make_shared<RecordingSink<baton::v1::LogLine>>();
  LogQuery query;
  query.rank = 1;
  query.tail = 3;
  query.follow = true;
  ASSERT_OK(streams_->Follow("j", query, /*ended=*/false, sink));
  EXPECT_EQ(LineSeqs(*sink), (std::vector<int64_t>{25, 27, 29}));
  const std::vector<baton::v1::LogLine> more = TimedLines(31, 34);
  ASSERT_OK(store_->AppendLogs("j", more));
  streams_->PublishLogs("j", more);
  EXPECT_EQ(LineSeqs(*sink), (std::vector<int64_t>{25, 27, 29, 31, 33}));
  EXPECT_FALSE(sink->finished);
}

// A tail longer than the history sends it all; a tail that starts before after_seq
// starts at after_seq.
TEST_F(JobStreamsTest, TailLongerThanHistoryOrBeforeTheCursor) {
  ASSERT_OK(store_->AppendLogs("j", TimedLines(1, 5)));
  auto all = std::make_shared<RecordingSink<baton::v1::LogLine>>();
  LogQuery query;
  query.tail = 100;
  ASSERT_OK(streams_->Follow("j", query, /*ended=*/true, all));
  EXPECT_EQ(LineSeqs(*all), (std::vector<int64_t>{1, 2, 3, 4, 5}));
  EXPECT_TRUE(all->finished);

  auto resumed = std::make_shared<RecordingSink<baton::v1::LogLine>>();
  query.tail = 4;
  query.after_seq = 3;
  ASSERT_OK(streams_->Follow("j", query, /*ended=*/true, resumed));
  EXPECT_EQ(LineSeqs(*resumed), (std::vector<int64_t>{4, 5}));
}

// `since` drops older lines from history and from the live stream alike (times need not
// follow seq: workers' clocks differ), and `tail` counts only the lines since then.
TEST_F(JobStreamsTest, SinceFiltersHistoryAndLiveLines) {
  std::vector<baton::v1::LogLine> lines = TimedLines(1, 20);
  lines[17].mutable_time()->set_seconds(2);  // seq 18 was written at second 2
  ASSERT_OK(store_->AppendLogs("j", lines));
  auto sink = std::make_shared<RecordingSink<baton::v1::LogLine>>();
  LogQuery query;
  query.since_us = 15'000'000;
  query.follow = true;
  ASSERT_OK(streams_->Follow("j", query, /*ended=*/false, sink));
  EXPECT_EQ(LineSeqs(*sink), (std::vector<int64_t>{15, 16, 17, 19, 20}));
  std::vector<baton::v1::LogLine> live = TimedLines(21, 22);
  live[0].mutable_time()->set_seconds(1);
  ASSERT_OK(store_->AppendLogs("j", live));
  streams_->PublishLogs("j", live);
  EXPECT_EQ(LineSeqs(*sink), (std::vector<int64_t>{15, 16, 17, 19, 20, 22}));

  auto tail = std::make_shared<RecordingSink<baton::v1::LogLine>>();
  query.tail = 4;
  query.follow = false;
  ASSERT_OK(streams_->Follow("j", query, /*ended=*/false, tail));
  EXPECT_EQ(LineSeqs(*tail), (std::vector<int64_t>{17, 19, 20, 22}));
}

}  // namespace
}  // namespace baton::coordinator
