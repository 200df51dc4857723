#include "bench/control_plane/job_watch.h"

#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "common/time/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::bench {
namespace {

using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1700000000);

baton::v1::JobUpdate Event(baton::v1::JobState to, absl::Time when, int64_t generation) {
  baton::v1::JobUpdate update;
  baton::v1::JobEvent* e = update.mutable_event();
  e->set_to_state(to);
  *e->mutable_time() = ToProto(when);
  e->set_generation(generation);
  return update;
}

// Every Await* below is answered from what was noted: its deadline has passed.
absl::Time Past() { return absl::Now() - absl::Seconds(1); }

TEST(JobWatchTest, RunningIsTheFirstRunningEventsTime) {
  JobWatch watch(2);
  watch.Note(0, Event(baton::v1::JOB_STATE_RUNNING, kT0, 1));
  watch.Note(1, Event(baton::v1::JOB_STATE_RUNNING, kT0 + absl::Seconds(5), 2));
  absl::StatusOr<absl::Time> running = watch.AwaitRunning(Past());
  ASSERT_OK(running);
  EXPECT_EQ(*running, kT0);
  EXPECT_EQ(watch.updates(), 2);
}

TEST(JobWatchTest, RunningFromASnapshotsEvents) {
  JobWatch watch(1);
  baton::v1::JobUpdate update;
  baton::v1::JobEvent* e = update.mutable_snapshot()->add_events();
  e->set_to_state(baton::v1::JOB_STATE_RUNNING);
  *e->mutable_time() = ToProto(kT0);
  update.mutable_snapshot()->set_state(baton::v1::JOB_STATE_RUNNING);
  watch.Note(0, update);
  absl::StatusOr<absl::Time> running = watch.AwaitRunning(Past());
  ASSERT_OK(running);
  EXPECT_EQ(*running, kT0);
}

TEST(JobWatchTest, NoRunningByTheDeadline) {
  JobWatch watch(1);
  EXPECT_THAT(watch.AwaitRunning(Past()),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("RUNNING")));
}

TEST(JobWatchTest, AnEndBeforeRunningAbortsWithTheFailure) {
  JobWatch watch(1);
  baton::v1::JobUpdate failed = Event(baton::v1::JOB_STATE_FAILED, kT0, 1);
  failed.mutable_event()->set_reason("rank_failed");
  failed.mutable_event()->set_message("rank 0 exited 1");
  watch.Note(0, failed);
  EXPECT_THAT(watch.AwaitRunning(absl::InfiniteFuture()),
              StatusIs(absl::StatusCode::kAborted, HasSubstr("rank_failed: rank 0 exited 1")));
}

TEST(JobWatchTest, EndIsOkOnlyIfEveryWatcherSawTheWantedState) {
  JobWatch watch(2);
  watch.Note(0, Event(baton::v1::JOB_STATE_SUCCEEDED, kT0, 1));
  EXPECT_THAT(watch.AwaitEnd(baton::v1::JOB_STATE_SUCCEEDED, Past()),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("watcher 1 saw the job end in JOB_STATE_UNSPECIFIED")));
  watch.Note(1, Event(baton::v1::JOB_STATE_SUCCEEDED, kT0, 1));
  EXPECT_OK(watch.AwaitEnd(baton::v1::JOB_STATE_SUCCEEDED, absl::InfiniteFuture()));
  EXPECT_THAT(watch.AwaitEnd(baton::v1::JOB_STATE_CANCELLED, Past()),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("watcher 0")));
}

TEST(JobWatchTest, RestartTimesRestartingThenTheGenerationsRunning) {
  JobWatch watch(1);
  watch.Note(0, Event(baton::v1::JOB_STATE_RUNNING, kT0, 1));
  EXPECT_THAT(watch.AwaitRestart(2, Past()),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("never went RESTARTING")));
  watch.Note(0, Event(baton::v1::JOB_STATE_RESTARTING, kT0 + absl::Seconds(4), 1));
  EXPECT_THAT(watch.AwaitRestart(2, Past()),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("generation 2")));
  watch.Note(0, Event(baton::v1::JOB_STATE_RUNNING, kT0 + absl::Seconds(5), 2));
  absl::StatusOr<std::pair<absl::Time, absl::Time>> restart =
      watch.AwaitRestart(2, absl::InfiniteFuture());
  ASSERT_OK(restart);
  EXPECT_EQ(restart->first, kT0 + absl::Seconds(4));
  EXPECT_EQ(restart->second, kT0 + absl::Seconds(5));
}

TEST(JobWatchTest, LatencyOnlyOfPointsReceivedWhileMeasuring) {
  JobWatch watch(1);
  baton::v1::JobUpdate point;
  *point.mutable_metric()->mutable_time() = ToProto(absl::Now() - absl::Hours(1));
  watch.Note(0, point);
  EXPECT_EQ(watch.LatencyQuantileMs(0.5), 0);
  watch.MeasureLatency(true);
  watch.Note(0, point);
  watch.MeasureLatency(false);
  watch.Note(0, point);
  EXPECT_GE(watch.LatencyQuantileMs(0.5), absl::ToDoubleMilliseconds(absl::Hours(1)));
  EXPECT_EQ(watch.LatencyQuantileMs(0.5), watch.LatencyQuantileMs(0.99));  // one sample
  EXPECT_EQ(watch.updates(), 3);
}

}  // namespace
}  // namespace baton::bench
