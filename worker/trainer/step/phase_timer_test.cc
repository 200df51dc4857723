#include "worker/trainer/step/phase_timer.h"

#include "absl/time/time.h"
#include "common/time/clock.h"
#include "common/time/testing/fake_clock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using absl::Milliseconds;

TEST(PhaseTimerTest, LapsChargeTheTimeSinceTheLastMarkAndSumToTheStep) {
  FakeClock clock;
  PhaseTimer timer(clock);
  timer.Start();
  for (int micro = 0; micro < 2; ++micro) {  // Two micro-batches: phases accumulate.
    clock.Advance(Milliseconds(3));
    timer.Lap(Phase::kData);
    clock.Advance(Milliseconds(5));
    timer.Lap(Phase::kForward);
    clock.Advance(Milliseconds(7));
    timer.Lap(Phase::kBackward);
  }
  clock.Advance(Milliseconds(11));
  timer.LapSplit(Phase::kCommWait, Milliseconds(4), Phase::kOptimizer);
  clock.Advance(Milliseconds(100));  // After the last lap: not part of the step.
  const PhaseTimes t = timer.Stop();
  EXPECT_EQ(t.data, Milliseconds(6));
  EXPECT_EQ(t.forward, Milliseconds(10));
  EXPECT_EQ(t.backward, Milliseconds(14));
  EXPECT_EQ(t.comm_wait, Milliseconds(4));
  EXPECT_EQ(t.optimizer, Milliseconds(7));
  EXPECT_EQ(t.step, Milliseconds(41));
  EXPECT_EQ(t.PhaseSum(), t.step);
}

TEST(PhaseTimerTest, SplitIsClampedToTheLap) {
  FakeClock clock;
  PhaseTimer timer(clock);
  timer.Start();
  clock.Advance(Milliseconds(2));
  timer.LapSplit(Phase::kCommWait, Milliseconds(5), Phase::kOptimizer);  // More than elapsed.
  PhaseTimes t = timer.Stop();
  EXPECT_EQ(t.comm_wait, Milliseconds(2));
  EXPECT_EQ(t.optimizer, absl::ZeroDuration());
  EXPECT_EQ(t.step, Milliseconds(2));

  timer.Start();
  clock.Advance(Milliseconds(2));
  timer.LapSplit(Phase::kCommWait, -Milliseconds(1), Phase::kOptimizer);
  t = timer.Stop();
  EXPECT_EQ(t.comm_wait, absl::ZeroDuration());
  EXPECT_EQ(t.optimizer, Milliseconds(2));
}

TEST(PhaseTimerTest, EachStepStartsFromZeroAndTimesAdd) {
  FakeClock clock;
  PhaseTimer timer(clock);
  PhaseTimes total;
  for (int step = 1; step <= 3; ++step) {
    timer.Start();
    clock.Advance(Milliseconds(step));
    timer.Lap(Phase::kData);
    clock.Advance(Milliseconds(10));
    timer.Lap(Phase::kOptimizer);
    const PhaseTimes t = timer.Stop();
    EXPECT_EQ(t.data, Milliseconds(step));
    EXPECT_EQ(t.step, Milliseconds(step + 10));
    total += t;
  }
  EXPECT_EQ(total.data, Milliseconds(6));
  EXPECT_EQ(total.optimizer, Milliseconds(30));
  EXPECT_EQ(total.step, Milliseconds(36));
  EXPECT_EQ(total.PhaseSum(), total.step);
}

}  // namespace
}  // namespace baton::trainer

namespace baton::trainer {
namespace {

TEST(PhaseTimerTest, WhileTracingEveryLapIsASpanThatTilesTheStep) {
  FakeClock clock;
  PhaseTimer timer(clock);
  TraceRecorder recorder;
  timer.SetTrace(&recorder, 7);
  timer.Start();
  const absl::Time start = clock.Now();
  clock.Advance(absl::Milliseconds(3));
  timer.Lap(Phase::kData);
  clock.Advance(absl::Milliseconds(5));
  timer.Lap(Phase::kForward);
  clock.Advance(absl::Milliseconds(11));
  timer.LapSplit(Phase::kCommWait, absl::Milliseconds(4), Phase::kOptimizer);
  timer.Stop();
  const std::vector<TraceSpan> spans = recorder.Spans();
  ASSERT_EQ(spans.size(), 4u);
  const char* names[] = {"data", "forward", "comm_wait", "optimizer"};
  const absl::Duration durations[] = {absl::Milliseconds(3), absl::Milliseconds(5),
                                      absl::Milliseconds(4), absl::Milliseconds(7)};
  absl::Time at = start;
  for (size_t i = 0; i < spans.size(); ++i) {
    EXPECT_EQ(spans[i].name, names[i]);
    EXPECT_EQ(spans[i].start, at) << i;  // Contiguous: no gap, no overlap.
    EXPECT_EQ(spans[i].duration, durations[i]) << i;
    EXPECT_EQ(spans[i].int_args.at("step"), 7);
    EXPECT_EQ(spans[i].thread, kTrainingTraceThread);
    at += spans[i].duration;
  }
  // Not tracing: nothing more is recorded.
  timer.SetTrace(nullptr, 0);
  timer.Start();
  timer.Lap(Phase::kData);
  EXPECT_EQ(recorder.Spans().size(), 4u);
}

}  // namespace
}  // namespace baton::trainer
