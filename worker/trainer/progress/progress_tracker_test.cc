#include "worker/trainer/progress/progress_tracker.h"

#include <string>

#include "common/time/testing/fake_clock.h"
#include "gtest/gtest.h"
#include "worker/trainer/progress/heartbeat.h"

namespace baton::trainer {
namespace {

absl::Duration Ref(const ProgressTracker::Snapshot& s, TrainingPhase p) {
  return s.reference[static_cast<int>(p)];
}

TEST(ProgressTrackerTest, TheFirstStepBelongsToTheStartup) {
  FakeClock clock;
  ProgressTracker t(&clock);
  clock.Advance(absl::Seconds(3));
  t.Begin(TrainingPhase::kStep);   // the first step: still startup
  t.Begin(TrainingPhase::kEpoch);  // an epoch boundary inside it too
  clock.Advance(absl::Seconds(1));
  EXPECT_EQ(t.Take().phase, TrainingPhase::kStartup);
  EXPECT_EQ(t.Take().in_phase, absl::Seconds(4));
  t.StepDone(11);
  t.Begin(TrainingPhase::kStep);
  clock.Advance(absl::Milliseconds(10));
  const ProgressTracker::Snapshot s = t.Take();
  EXPECT_EQ(s.phase, TrainingPhase::kStep);
  EXPECT_EQ(s.step, 11);
  EXPECT_EQ(s.in_phase, absl::Milliseconds(10));
  EXPECT_EQ(Ref(s, TrainingPhase::kStartup), absl::Seconds(4));
  EXPECT_EQ(Ref(s, TrainingPhase::kStep), absl::ZeroDuration());  // none completed yet
}

TEST(ProgressTrackerTest, ReferenceIsTheLongestOfTheRecentWindow) {
  FakeClock clock;
  ProgressTracker t(&clock);
  t.StepDone(1);
  t.Begin(TrainingPhase::kStep);
  // One slow step, then enough fast ones to push it out of the window.
  clock.Advance(absl::Milliseconds(500));
  t.Begin(TrainingPhase::kStep);
  for (size_t i = 0; i < ProgressTracker::kWindow - 1; ++i) {
    clock.Advance(absl::Milliseconds(10));
    t.Begin(TrainingPhase::kStep);
  }
  EXPECT_EQ(Ref(t.Take(), TrainingPhase::kStep), absl::Milliseconds(500));
  clock.Advance(absl::Milliseconds(10));
  t.Begin(TrainingPhase::kStep);
  EXPECT_EQ(Ref(t.Take(), TrainingPhase::kStep), absl::Milliseconds(10));
}

TEST(ProgressTrackerTest, PhasesKeepTheirOwnReferences) {
  FakeClock clock;
  ProgressTracker t(&clock);
  t.StepDone(1);
  t.Begin(TrainingPhase::kCheckpoint);
  clock.Advance(absl::Seconds(2));
  t.Begin(TrainingPhase::kStep);
  clock.Advance(absl::Milliseconds(10));
  t.Begin(TrainingPhase::kEval);
  clock.Advance(absl::Seconds(7));
  t.Begin(TrainingPhase::kStep);
  const ProgressTracker::Snapshot s = t.Take();
  EXPECT_EQ(Ref(s, TrainingPhase::kCheckpoint), absl::Seconds(2));
  EXPECT_EQ(Ref(s, TrainingPhase::kEval), absl::Seconds(7));
  EXPECT_EQ(Ref(s, TrainingPhase::kStep), absl::Milliseconds(10));
}

TEST(ProgressTrackerTest, ARejoinStartsAStartupWithoutCountingTheCutOffPhase) {
  FakeClock clock;
  ProgressTracker t(&clock);
  t.StepDone(1);
  t.Begin(TrainingPhase::kStep);
  clock.Advance(absl::Seconds(30));  // the step that lost its peer
  t.Begin(TrainingPhase::kStartup);
  clock.Advance(absl::Seconds(1));
  t.Begin(TrainingPhase::kStep);  // first step of the new generation: still startup
  const ProgressTracker::Snapshot s = t.Take();
  EXPECT_EQ(s.phase, TrainingPhase::kStartup);
  EXPECT_EQ(s.in_phase, absl::Seconds(1));
  EXPECT_EQ(Ref(s, TrainingPhase::kStep), absl::ZeroDuration());
}

TEST(ProgressTrackerTest, ParkedUntilTheNextStartup) {
  FakeClock clock;
  ProgressTracker t(&clock);
  t.StepDone(5);
  t.Begin(TrainingPhase::kStep);
  t.Park();
  t.Begin(TrainingPhase::kStep);  // a late mark of the abandoned generation: ignored
  EXPECT_TRUE(t.Take().parked);
  clock.Advance(absl::Seconds(4));
  t.Begin(TrainingPhase::kStartup);
  const ProgressTracker::Snapshot s = t.Take();
  EXPECT_FALSE(s.parked);
  EXPECT_EQ(s.phase, TrainingPhase::kStartup);
  EXPECT_EQ(s.in_phase, absl::ZeroDuration());
}

TEST(ProgressTrackerTest, CollectivesAndWaits) {
  FakeClock clock;
  ProgressTracker t(&clock);
  t.CollectiveStarted();
  t.CollectiveStarted();
  EXPECT_EQ(t.Take().collectives, 2);
  EXPECT_FALSE(t.Take().waiting);
  t.WaitBegin();
  clock.Advance(absl::Seconds(1));
  t.WaitBegin();  // nested (a blocking collective's own pending wait)
  clock.Advance(absl::Seconds(1));
  t.WaitEnd();
  ProgressTracker::Snapshot s = t.Take();
  EXPECT_TRUE(s.waiting);
  EXPECT_EQ(s.waited, absl::Seconds(2));
  t.WaitEnd();
  EXPECT_FALSE(t.Take().waiting);
}

TEST(HeartbeatFieldsTest, KeysAsTheContractSays) {
  FakeClock clock;
  ProgressTracker t(&clock);
  t.StepDone(4);
  t.Begin(TrainingPhase::kStep);
  clock.Advance(absl::Milliseconds(250));
  t.Begin(TrainingPhase::kStep);
  t.CollectiveStarted();
  t.WaitBegin();
  clock.Advance(absl::Milliseconds(500));
  EXPECT_EQ(FormatMetricsLine(HeartbeatFields(7, t.Take())),
            "{\"beat\":7,\"step\":4,\"phase\":1,\"phase_s\":0.5,\"coll\":1,\"waiting\":1,"
            "\"wait_s\":0.5,\"ref_step_s\":0.25}\n");
}

}  // namespace
}  // namespace baton::trainer
