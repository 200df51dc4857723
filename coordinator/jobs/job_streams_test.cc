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
  ASSERT_OK(streams_->Follow("j", /*rank=*/1, 0, /*follow=*/false, /*ended=*/false, sink));
  ASSERT_EQ(sink->items.size(), 15u);
  for (const auto& line : sink->items) EXPECT_EQ(line.rank(), 1);
  EXPECT_TRUE(sink->finished);
}

}  // namespace
}  // namespace baton::coordinator
