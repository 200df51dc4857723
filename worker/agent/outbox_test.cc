#include "worker/agent/outbox.h"

#include <optional>
#include <thread>

#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

baton::v1::LogLine Line(const std::string& text) {
  baton::v1::LogLine l;
  l.set_text(text);
  return l;
}

baton::v1::MetricPoint Point(int64_t step) {
  baton::v1::MetricPoint p;
  p.set_step(step);
  (*p.mutable_values())["loss"] = 1.0;
  return p;
}

// Heartbeat `seq` of `rank`.
baton::v1::RankBeat Beat(int32_t rank, int64_t seq) {
  baton::v1::RankBeat b;
  b.set_rank(rank);
  b.set_generation(2);
  b.set_seq(seq);
  b.set_step(seq * 10);
  b.set_phase("step");
  return b;
}

class OutboxTest : public ::testing::Test {
 protected:
  OutboxTest() : outbox_(Options(), &clock_) { outbox_.SetConnected(true); }
  static OutboxOptions Options() {
    OutboxOptions o;
    o.flush_interval = absl::Milliseconds(200);
    o.max_batch_entries = 3;
    o.max_pending_entries = 5;
    return o;
  }
  FakeClock clock_;
  Outbox outbox_;
};

TEST_F(OutboxTest, BatchIsDueAfterFlushInterval) {
  outbox_.OnLogLine("j1", Line("a"));
  outbox_.OnMetricPoint("j1", Point(1));
  EXPECT_EQ(outbox_.NextFlushTime(), clock_.Now() + absl::Milliseconds(200));
  EXPECT_THAT(outbox_.TakeBatches(false), ::testing::IsEmpty());
  clock_.Advance(absl::Milliseconds(200));
  const std::vector<baton::v1::WorkerMessage> out = outbox_.TakeBatches(false);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].logs().job_id(), "j1");
  ASSERT_EQ(out[0].logs().lines_size(), 1);
  EXPECT_EQ(out[0].logs().lines(0).text(), "a");
  EXPECT_EQ(out[1].metrics().job_id(), "j1");
  EXPECT_EQ(out[1].metrics().points(0).step(), 1);
  EXPECT_EQ(outbox_.NextFlushTime(), absl::InfiniteFuture());
}

TEST_F(OutboxTest, FullBatchIsDueAtOnceAndSplitPerJobAndSize) {
  outbox_.OnLogLine("j1", Line("1"));
  outbox_.OnLogLine("j2", Line("2"));
  EXPECT_THAT(outbox_.TakeBatches(false), ::testing::IsEmpty());
  outbox_.OnLogLine("j1", Line("3"));
  const std::vector<baton::v1::WorkerMessage> out = outbox_.TakeBatches(false);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].logs().job_id(), "j1");
  EXPECT_EQ(out[0].logs().lines_size(), 2);
  EXPECT_EQ(out[1].logs().job_id(), "j2");
}

TEST_F(OutboxTest, OnlyTheNewestBeatOfARankIsSentWithItsAge) {
  for (int64_t seq = 1; seq <= 50; ++seq) {
    outbox_.OnHeartbeat("j", Beat(0, seq), clock_.Now());
    outbox_.OnHeartbeat("j", Beat(1, seq), clock_.Now());
    clock_.Advance(absl::Milliseconds(1));
  }
  // 100 beats of two ranks: two entries, so the batch is neither full nor dropping.
  EXPECT_TRUE(outbox_.TakeBatches(false).empty());
  EXPECT_EQ(outbox_.TakeDropped().metric_points, 0);
  outbox_.OnMetricPoint("j", Point(7));  // a metric line still travels as a point
  clock_.Advance(absl::Milliseconds(200));
  const std::vector<baton::v1::WorkerMessage> out = outbox_.TakeBatches(false);
  std::vector<baton::v1::RankBeat> beats;
  int points = 0;
  for (const baton::v1::WorkerMessage& m : out) {
    ASSERT_TRUE(m.has_metrics());
    EXPECT_EQ(m.metrics().job_id(), "j");
    points += m.metrics().points_size();
    beats.insert(beats.end(), m.metrics().beats().begin(), m.metrics().beats().end());
  }
  EXPECT_EQ(points, 1);
  ASSERT_EQ(beats.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(beats[r].rank(), r);
    EXPECT_EQ(beats[r].generation(), 2);
    EXPECT_EQ(beats[r].seq(), 50);
    EXPECT_EQ(beats[r].phase(), "step");
    EXPECT_EQ(FromProto(beats[r].age()), absl::Milliseconds(201));  // read 1 + 200 ms ago
  }
  EXPECT_TRUE(outbox_.TakeBatches(true).empty());  // sent once
}

TEST_F(OutboxTest, ForceFlushesAndLargeBatchesAreChunked) {
  OutboxOptions o = Options();
  o.max_pending_entries = 100;
  Outbox outbox(o, &clock_);
  outbox.SetConnected(true);
  for (int i = 0; i < 7; ++i) outbox.OnMetricPoint("j", Point(i));
  const std::vector<baton::v1::WorkerMessage> out = outbox.TakeBatches(true);
  ASSERT_EQ(out.size(), 3u);  // 3 + 3 + 1
  EXPECT_EQ(out[0].metrics().points_size(), 3);
  EXPECT_EQ(out[2].metrics().points(0).step(), 6);
}

TEST_F(OutboxTest, BacklogBeyondLimitIsDroppedAndCounted) {
  for (int i = 0; i < 7; ++i) outbox_.OnLogLine("j", Line("x"));
  EXPECT_EQ(outbox_.TakeDropped().log_lines, 2);
  EXPECT_EQ(outbox_.TakeDropped().log_lines, 0);
}

TEST_F(OutboxTest, DisconnectedDropsEverythingButReports) {
  outbox_.OnLogLine("j", Line("queued"));
  baton::v1::WorkerMessage reply;
  reply.mutable_port_reserved()->set_port(1234);
  outbox_.PushReply(reply);
  outbox_.SetConnected(false);
  outbox_.OnMetricPoint("j", Point(1));
  outbox_.PushReply(reply);
  outbox_.OnReportsPending();
  EXPECT_THAT(outbox_.TakeBatches(true), ::testing::IsEmpty());
  EXPECT_THAT(outbox_.TakeReplies(), ::testing::IsEmpty());
  EXPECT_TRUE(outbox_.TakeReportsPending());
  EXPECT_FALSE(outbox_.TakeReportsPending());
  const Outbox::Dropped d = outbox_.TakeDropped();
  EXPECT_EQ(d.log_lines, 1);
  EXPECT_EQ(d.metric_points, 1);
  EXPECT_EQ(d.replies, 2);
}

TEST_F(OutboxTest, WaitForWorkReturnsForWorkOrWhenTheDeadlinePassesOnTheClock) {
  baton::v1::WorkerMessage reply;
  reply.mutable_port_reserved()->set_port(1);
  outbox_.PushReply(reply);
  EXPECT_TRUE(outbox_.WaitForWork(absl::InfiniteFuture()));  // Already there: no wait.
  EXPECT_EQ(outbox_.TakeReplies().size(), 1u);
  outbox_.Wake();
  EXPECT_TRUE(outbox_.WaitForWork(absl::InfiniteFuture()));
  EXPECT_FALSE(outbox_.WaitForWork(clock_.Now()));  // The Wake() was used up.

  // Nothing to do: it waits until the clock reaches the deadline.
  const absl::Time deadline = clock_.Now() + absl::Seconds(1);
  std::optional<bool> work;
  std::thread writer([&] { work = outbox_.WaitForWork(deadline); });
  ASSERT_TRUE(clock_.AwaitTimerAt(deadline));
  clock_.Advance(absl::Seconds(1));
  writer.join();
  EXPECT_EQ(work, false);
}

// The writer waits until the next heartbeat or flush; a batch that starts meanwhile brings
// its flush time forward, so the first entry of a batch is work (the others are not).
TEST_F(OutboxTest, TheFirstEntryOfABatchWakesTheWriter) {
  const absl::Time heartbeat = clock_.Now() + absl::Seconds(1);
  std::optional<bool> work;
  std::thread writer([&] { work = outbox_.WaitForWork(heartbeat); });
  ASSERT_TRUE(clock_.AwaitTimerAt(heartbeat));
  outbox_.OnLogLine("j", Line("a"));
  writer.join();
  EXPECT_EQ(work, true);
  EXPECT_EQ(outbox_.NextFlushTime(), clock_.Now() + absl::Milliseconds(200));
  outbox_.OnLogLine("j", Line("b"));
  EXPECT_FALSE(outbox_.WaitForWork(clock_.Now()));
}

// Reports cannot be sent without a connection: waking the writer for them would spin it.
TEST_F(OutboxTest, PendingReportsAreWorkOnlyWhileConnected) {
  outbox_.SetConnected(false);
  outbox_.OnReportsPending();
  EXPECT_FALSE(outbox_.WaitForWork(clock_.Now()));
  outbox_.SetConnected(true);
  EXPECT_TRUE(outbox_.WaitForWork(clock_.Now()));
  EXPECT_TRUE(outbox_.TakeReportsPending());
}

}  // namespace
}  // namespace baton::worker
