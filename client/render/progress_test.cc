#include "client/render/progress.h"

#include <sstream>
#include <string>

#include "absl/time/time.h"
#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::cli {
namespace {

using baton::v1::JobUpdate;

const absl::Time kT0 = absl::FromUnixSeconds(1714564800);  // 2024-05-01 12:00:00 UTC

JobUpdate Snapshot(baton::v1::JobState state, int64_t max_steps = 1000) {
  JobUpdate u;
  auto* job = u.mutable_snapshot();
  job->set_id("j-1");
  job->set_state(state);
  job->mutable_spec()->mutable_budget()->set_max_steps(max_steps);
  return u;
}

JobUpdate Metric(int64_t seq, int64_t step, absl::Time t, int rank = 0, int64_t gen = 1) {
  JobUpdate u;
  u.set_seq(seq);
  auto* m = u.mutable_metric();
  m->set_step(step);
  m->set_rank(rank);
  m->set_generation(gen);
  *m->mutable_time() = ToProto(t);
  (*m->mutable_values())["loss"] = 0.5;
  (*m->mutable_values())["accuracy"] = 0.912;
  (*m->mutable_values())["samples_per_sec"] = 1234.4;
  return u;
}

JobUpdate StateEvent(int64_t seq, baton::v1::JobState from, baton::v1::JobState to,
                     absl::Time t) {
  JobUpdate u;
  u.set_seq(seq);
  auto* e = u.mutable_event();
  e->set_from_state(from);
  e->set_to_state(to);
  e->set_reason("Started");
  *e->mutable_time() = ToProto(t);
  return u;
}

TEST(ProgressTrackerTest, LineStepsRateAndEta) {
  ProgressTracker tracker;
  tracker.Apply(Snapshot(baton::v1::JOB_STATE_RUNNING));
  EXPECT_EQ(RenderProgressLine(tracker, kT0), "RUNNING");

  tracker.Apply(Metric(3, 100, kT0));
  // One point: no rate yet, so no ETA.
  EXPECT_EQ(RenderProgressLine(tracker, kT0),
            "step 100/1000 (10%)  loss 0.5  acc 91.2%  1234 samples/s  RUNNING");
  tracker.Apply(Metric(4, 300, kT0 + absl::Seconds(10)));  // 20 steps/s
  EXPECT_EQ(tracker.last_seq(), 4);
  ASSERT_TRUE(tracker.StepRate().has_value());
  EXPECT_DOUBLE_EQ(*tracker.StepRate(), 20.0);
  // 700 steps left at 20/s = 35 s, 5 s of which already passed.
  EXPECT_EQ(tracker.Eta(kT0 + absl::Seconds(15)), absl::Seconds(30));
  EXPECT_EQ(RenderProgressLine(tracker, kT0 + absl::Seconds(15)),
            "step 300/1000 (30%)  loss 0.5  acc 91.2%  1234 samples/s  ETA 30s  RUNNING");
  // Never negative.
  EXPECT_EQ(tracker.Eta(kT0 + absl::Hours(1)), absl::ZeroDuration());
}

TEST(ProgressTrackerTest, IgnoresOtherRanksAndResetsWindowOnNewGeneration) {
  ProgressTracker tracker;
  tracker.Apply(Snapshot(baton::v1::JOB_STATE_RUNNING));
  tracker.Apply(Metric(1, 100, kT0));
  tracker.Apply(Metric(2, 900, kT0 + absl::Seconds(1), /*rank=*/1));
  EXPECT_EQ(tracker.latest_metric()->step(), 100);
  EXPECT_EQ(tracker.last_seq(), 2);

  tracker.Apply(Metric(3, 200, kT0 + absl::Seconds(10)));
  EXPECT_DOUBLE_EQ(*tracker.StepRate(), 10.0);
  // Restarted from a checkpoint in generation 2: the window starts over.
  tracker.Apply(Metric(4, 150, kT0 + absl::Seconds(60), 0, /*gen=*/2));
  EXPECT_FALSE(tracker.StepRate().has_value());
  tracker.Apply(Metric(5, 250, kT0 + absl::Seconds(65), 0, 2));
  EXPECT_DOUBLE_EQ(*tracker.StepRate(), 20.0);
}

TEST(ProgressTrackerTest, NoTotalMeansNoPercentOrEta) {
  ProgressTracker tracker;
  tracker.Apply(Snapshot(baton::v1::JOB_STATE_RUNNING, /*max_steps=*/0));
  tracker.Apply(Metric(1, 10, kT0));
  tracker.Apply(Metric(2, 20, kT0 + absl::Seconds(1)));
  EXPECT_FALSE(tracker.Eta(kT0 + absl::Seconds(1)).has_value());
  EXPECT_EQ(RenderProgressLine(tracker, kT0),
            "step 20  loss 0.5  acc 91.2%  1234 samples/s  RUNNING");
}

TEST(ProgressTrackerTest, EventsMoveState) {
  ProgressTracker tracker;
  tracker.Apply(Snapshot(baton::v1::JOB_STATE_RENDEZVOUS));
  tracker.Apply(StateEvent(7, baton::v1::JOB_STATE_RENDEZVOUS, baton::v1::JOB_STATE_RUNNING, kT0));
  EXPECT_EQ(tracker.job().state(), baton::v1::JOB_STATE_RUNNING);
  EXPECT_EQ(tracker.last_seq(), 7);
  tracker.Apply(Metric(8, 10, kT0));
  tracker.Apply(Metric(9, 20, kT0 + absl::Seconds(1)));
  tracker.Apply(StateEvent(10, baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_SUCCEEDED, kT0));
  EXPECT_FALSE(tracker.Eta(kT0).has_value());  // terminal
}

TEST(ProgressPrinterTest, TtyRedrawsInPlaceAndPrintsEventsAbove) {
  FakeClock clock(kT0);
  std::ostringstream out;
  ProgressTracker tracker;
  ProgressPrinter printer(out, /*tty=*/true, clock, absl::UTCTimeZone());
  auto feed = [&](const JobUpdate& u) {
    tracker.Apply(u);
    printer.OnUpdate(tracker, u);
  };
  feed(Snapshot(baton::v1::JOB_STATE_RUNNING));
  feed(Metric(1, 100, kT0));
  feed(StateEvent(2, baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_SUCCEEDED, kT0));
  printer.Finish();
  printer.Finish();
  EXPECT_EQ(out.str(),
            "\r\x1b[KRUNNING"
            "\r\x1b[Kstep 100/1000 (10%)  loss 0.5  acc 91.2%  1234 samples/s  RUNNING"
            "\r\x1b[K[12:00:00] RUNNING -> SUCCEEDED  Started\n"
            "\r\x1b[Kstep 100/1000 (10%)  loss 0.5  acc 91.2%  1234 samples/s  SUCCEEDED"
            "\n");
}

TEST(ProgressPrinterTest, PlainOutputIsThrottled) {
  FakeClock clock(kT0);
  std::ostringstream out;
  ProgressTracker tracker;
  ProgressPrinter printer(out, /*tty=*/false, clock, absl::UTCTimeZone(), absl::Seconds(2));
  auto feed = [&](const JobUpdate& u) {
    tracker.Apply(u);
    printer.OnUpdate(tracker, u);
  };
  feed(Snapshot(baton::v1::JOB_STATE_RUNNING));  // prints nothing
  feed(Metric(1, 100, kT0));                      // printed
  clock.Advance(absl::Seconds(1));
  feed(Metric(2, 200, kT0 + absl::Seconds(1)));  // within 2 s: skipped
  feed(Metric(3, 200, kT0 + absl::Seconds(1), /*rank=*/1));  // not rank 0
  clock.Advance(absl::Seconds(1));
  feed(Metric(4, 300, kT0 + absl::Seconds(2)));  // printed
  feed(StateEvent(5, baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_FAILED, kT0));
  printer.Finish();
  EXPECT_EQ(out.str(),
            "step 100/1000 (10%)  loss 0.5  acc 91.2%  1234 samples/s  RUNNING\n"
            "step 300/1000 (30%)  loss 0.5  acc 91.2%  1234 samples/s  ETA 7.0s  RUNNING\n"
            "[12:00:00] RUNNING -> FAILED  Started\n");
}

}  // namespace
}  // namespace baton::cli
