#include "coordinator/policy/stall_detector.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/spec/job_spec.h"
#include "common/time/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

// A job of `ranks` ranks on workers w0, w1, ...; `exited` ranks have an exit. Defaults
// for everything but what a test sets.
baton::v1::Job Job(int ranks, std::vector<int> exited = {}) {
  baton::v1::Job job;
  *job.mutable_spec()->mutable_restart_policy()->mutable_stall_floor() = ToProto(absl::Seconds(2));
  for (int r = 0; r < ranks; ++r) {
    baton::v1::RankInfo* info = job.add_ranks();
    info->set_rank(r);
    info->set_worker_id("w" + std::to_string(r));
  }
  for (int r : exited) job.mutable_ranks(r)->mutable_exit()->set_exit_code(0);
  return job;
}

baton::v1::MetricPoint Point(int rank, int64_t step, absl::Time at) {
  baton::v1::MetricPoint p;
  p.set_rank(rank);
  p.set_step(step);
  *p.mutable_time() = ToProto(at);
  return p;
}

struct BeatSpec {
  int rank = 0;
  int64_t seq = 1;
  int64_t step = 0;
  std::string phase = "step";
  absl::Duration in_phase;
  int64_t collectives = 0;
  bool waiting = false;
  absl::Duration waited;
  std::map<std::string, absl::Duration> references;
};

baton::v1::RankBeat Beat(const BeatSpec& b) {
  baton::v1::RankBeat beat;
  beat.set_rank(b.rank);
  beat.set_seq(b.seq);
  beat.set_step(b.step);
  beat.set_phase(b.phase);
  *beat.mutable_in_phase() = ToProto(b.in_phase);
  beat.set_collectives(b.collectives);
  beat.set_waiting(b.waiting);
  if (b.waiting) *beat.mutable_waited() = ToProto(b.waited);
  for (const auto& [phase, d] : b.references) (*beat.mutable_references())[phase] = ToProto(d);
  return beat;
}

// Workers all heard from at `heard` (their own heartbeats, every second).
StallDetector::Workers HeardAt(const absl::Time* heard) {
  StallDetector::Workers w;
  w.last_heard = [heard](const std::string&) { return *heard; };
  w.heartbeat_interval = absl::Seconds(1);
  return w;
}

// --- Ranks that report steps but do not beat (command jobs: baton.report()) ----------------

TEST(StallDetectorTest, NoStepsNoStall) {
  StallDetector d(kT0);
  EXPECT_EQ(d.Check(Job(2), kT0 + absl::Hours(10)), std::nullopt);
}

TEST(StallDetectorTest, ReportsTable) {
  struct Case {
    std::string name;
    std::vector<int> exited;
    absl::Duration silence;  // after the last progress
    std::optional<int> want_rank;
    std::string want_cause;
  };
  // Rank 0 reports every 10 s up to step 5; rank 1 stops at step 3. The longest time
  // between reports is 10 s, so the timeout is 30 s + 3 x 10 s = 60 s after the last
  // progress (rank 0's).
  const std::vector<Case> cases = {
      {"within the timeout", {}, absl::Seconds(59), std::nullopt, ""},
      {"past it: the rank that stopped first",
       {},
       absl::Seconds(60),
       1,
       "rank 1 on worker w1 stopped first at step 3"},
      {"an exited rank is never the suspect",
       {1},
       absl::Seconds(60),
       0,
       "rank 0 on worker w0 stopped first at step 5"},
      {"a live rank without steps stopped before any",
       {},
       absl::Seconds(60),
       2,
       "before its first step"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int ranks = c.name.find("without steps") != std::string::npos ? 3 : 2;
    StallDetector d(kT0);
    for (int64_t step = 1; step <= 5; ++step) {
      const absl::Time at = kT0 + absl::Seconds(10 * step);
      std::vector<baton::v1::MetricPoint> points = {Point(0, step, at)};
      if (step <= 3) points.push_back(Point(1, step, at));
      d.Note(points, at);
    }
    const absl::Time last = kT0 + absl::Seconds(50);
    std::optional<StallDetector::Stall> stall = d.Check(Job(ranks, c.exited), last + c.silence);
    ASSERT_EQ(stall.has_value(), c.want_rank.has_value());
    if (!stall) continue;
    EXPECT_EQ(stall->rank, *c.want_rank);
    EXPECT_EQ(stall->since, last);
    EXPECT_EQ(stall->evidence, "no-report");
    EXPECT_THAT(stall->cause, HasSubstr(c.want_cause));
    EXPECT_THAT(stall->cause,
                HasSubstr("timeout 1m = 30s + 3 x 10s, the longest recent time between reports"));
  }
}

TEST(StallDetectorTest, OneReportWaitsTheUnlearnedTimeout) {
  StallDetector d(kT0);
  d.Note({Point(0, 1, kT0)}, kT0);
  EXPECT_EQ(d.Check(Job(1), kT0 + absl::Minutes(9)), std::nullopt);
  std::optional<StallDetector::Stall> stall = d.Check(Job(1), kT0 + absl::Minutes(10));
  ASSERT_TRUE(stall.has_value());
  EXPECT_THAT(stall->cause, HasSubstr("before a rank's second report"));
}

// --- Ranks that beat (the built-in trainer) ---------------------------------------------------

// Two ranks at 10 ms steps, beating every 100 ms until `until`, both at step `step`; then
// rank 0 waits in collective #41 while rank 1 is frozen (no more beats).
StallDetector Frozen(absl::Time until, int64_t* seq) {
  StallDetector d(kT0);
  const std::map<std::string, absl::Duration> refs = {{"step", absl::Milliseconds(10)},
                                                      {"startup", absl::Seconds(1)}};
  for (absl::Time t = kT0 + absl::Seconds(1); t <= until; t += absl::Milliseconds(100)) {
    ++*seq;
    const int64_t step = (t - kT0) / absl::Milliseconds(10);
    d.NoteBeats({Beat({0, *seq, step, "step", absl::Milliseconds(3), 4 * step, false, {}, refs}),
                 Beat({1, *seq, step, "step", absl::Milliseconds(3), 4 * step, false, {}, refs})},
                t);
  }
  return d;
}

TEST(StallDetectorTest, AFrozenRankIsNamedNotTheOnesWaitingForIt) {
  int64_t seq = 0;
  const absl::Time frozen = kT0 + absl::Seconds(10);
  StallDetector d = Frozen(frozen, &seq);
  absl::Time heard = frozen;
  const StallDetector::Workers workers = HeardAt(&heard);
  // Rank 0 goes on beating, blocked in the next collective, its step unchanged.
  const int64_t step = (frozen - kT0) / absl::Milliseconds(10);
  for (absl::Time t = frozen + absl::Milliseconds(100); t <= frozen + absl::Seconds(3);
       t += absl::Milliseconds(100)) {
    d.NoteBeats({Beat({0, ++seq, step, "step", t - frozen, 4 * step + 1, true, t - frozen})}, t);
    heard = t;
    const std::optional<StallDetector::Stall> stall = d.Check(Job(2), t, workers);
    if (t < frozen + absl::Seconds(2)) {
      EXPECT_EQ(stall, std::nullopt) << absl::FormatDuration(t - frozen);
      continue;
    }
    ASSERT_TRUE(stall.has_value()) << absl::FormatDuration(t - frozen);
    EXPECT_EQ(stall->rank, 1);
    EXPECT_EQ(stall->worker_id, "w1");
    EXPECT_EQ(stall->evidence, "silent");
    EXPECT_EQ(stall->phase, "step");
    EXPECT_EQ(stall->since, frozen);
    EXPECT_THAT(stall->cause, HasSubstr("rank 1 on worker w1 sent no heartbeat for 2s"));
    EXPECT_THAT(stall->cause, HasSubstr("rank 0 waits for it in collective #"));
    return;
  }
  FAIL() << "never detected";
}

TEST(StallDetectorTest, AHungWorkerDaemonIsLeftToItsLease) {
  int64_t seq = 0;
  const absl::Time frozen = kT0 + absl::Seconds(10);
  StallDetector d = Frozen(frozen, &seq);
  // Worker w1 itself stopped (its ranks' beats stop with it): never a hang of its rank.
  StallDetector::Workers workers;
  workers.last_heard = [&](const std::string& w) {
    return w == "w1" ? frozen : frozen + absl::Minutes(5);
  };
  EXPECT_EQ(d.Check(Job(2), frozen + absl::Minutes(5), workers), std::nullopt);
  // Heard from just after the last beat: it may not have relayed newer ones yet.
  workers.last_heard = [&](const std::string&) { return frozen + absl::Milliseconds(300); };
  EXPECT_EQ(d.Check(Job(2), frozen + absl::Seconds(1.2), workers), std::nullopt);
}

TEST(StallDetectorTest, ABeatingRankStuckOutsideTheCollectiveIsNamed) {
  // Rank 1 deadlocked in its step (its heartbeat thread still runs); ranks 0 and 2 wait
  // in the collective it never started. Steps take at most 10 ms: timeout 2s + 3 x 10ms.
  StallDetector d(kT0);
  const std::map<std::string, absl::Duration> refs = {{"step", absl::Milliseconds(10)}};
  const absl::Time stuck = kT0 + absl::Seconds(5);
  d.NoteBeats({Beat({0, 1, 500, "step", {}, 2000, false, {}, refs}),
               Beat({1, 1, 500, "step", {}, 2000, false, {}, refs}),
               Beat({2, 1, 500, "step", {}, 2000, false, {}, refs})},
              stuck);
  int64_t seq = 1;
  absl::Time heard = stuck;
  for (absl::Duration e = absl::Milliseconds(100); e <= absl::Seconds(3);
       e += absl::Milliseconds(10)) {
    const absl::Time t = stuck + e;
    ++seq;
    d.NoteBeats({Beat({0, seq, 500, "step", e, 2001, true, e, refs}),
                 Beat({1, seq, 500, "step", e, 2000, false, {}, refs}),
                 Beat({2, seq, 500, "step", e, 2001, true, e, refs})},
                t);
    heard = t;
    const std::optional<StallDetector::Stall> stall = d.Check(Job(3), t, HeardAt(&heard));
    if (e < absl::Milliseconds(2030)) {
      ASSERT_EQ(stall, std::nullopt) << absl::FormatDuration(e);
      continue;
    }
    ASSERT_TRUE(stall.has_value());
    EXPECT_EQ(stall->rank, 1);
    EXPECT_EQ(stall->evidence, "stuck");
    EXPECT_EQ(stall->since, stuck);
    EXPECT_THAT(stall->cause,
                HasSubstr("rank 1 on worker w1 stuck in step for 2.03s at step 500 "
                          "(timeout 2.03s = 2s + 3 x 10ms, its longest recent step)"));
    EXPECT_THAT(stall->cause, HasSubstr("ranks 0, 2 wait for it in collective #2001"));
    return;
  }
  FAIL() << "never detected";
}

TEST(StallDetectorTest, ACheckpointIsJudgedByTheCheckpointsTimeout) {
  // Rank 0 saves (checkpoints took up to 5 s); rank 1 waits for it in the next step's
  // collective far longer than a step may take: no hang until 2s + 3 x 5s.
  StallDetector d(kT0);
  const std::map<std::string, absl::Duration> refs = {{"step", absl::Milliseconds(10)},
                                                      {"checkpoint", absl::Seconds(5)}};
  absl::Time heard;
  int64_t seq = 0;
  for (absl::Duration e = absl::ZeroDuration(); e <= absl::Seconds(20); e += absl::Seconds(1)) {
    const absl::Time t = kT0 + e;
    ++seq;
    d.NoteBeats({Beat({0, seq, 100, "checkpoint", e, 400, false, {}, refs}),
                 Beat({1, seq, 100, "step", e, 401, true, e, refs})},
                t);
    heard = t;
    const std::optional<StallDetector::Stall> stall = d.Check(Job(2), t, HeardAt(&heard));
    if (e < absl::Seconds(17)) {
      ASSERT_EQ(stall, std::nullopt) << absl::FormatDuration(e);
      continue;
    }
    ASSERT_TRUE(stall.has_value());
    EXPECT_EQ(stall->rank, 0);
    EXPECT_EQ(stall->phase, "checkpoint");
    EXPECT_THAT(stall->cause,
                HasSubstr("timeout 17s = 2s + 3 x 5s, its longest recent checkpoint"));
    return;
  }
  FAIL() << "never detected";
}

TEST(StallDetectorTest, PhaseTimeouts) {
  StallDetector d(kT0);
  // Rank 0 in its first evaluation, beating.
  int64_t seq = 0;
  const auto beat = [&](absl::Time t) {
    d.NoteBeats(
        {Beat({0, ++seq, 10, "eval", t - kT0, 0, false, {}, {{"startup", absl::Seconds(4)}}})}, t);
  };
  beat(kT0);
  baton::v1::Job job = Job(1);
  baton::v1::RestartPolicy* policy = job.mutable_spec()->mutable_restart_policy();
  // Unlearned phases wait stall_unlearned (10 min); a step without history takes the
  // startup's reference (which includes the generation's first step).
  EXPECT_EQ(d.PhaseTimeout(RestartPolicyWithDefaults(*policy), "eval"), absl::Minutes(10));
  EXPECT_EQ(d.PhaseTimeout(RestartPolicyWithDefaults(*policy), "step"), absl::Seconds(14));
  // The startup's floor is at least 30 s.
  EXPECT_EQ(d.PhaseTimeout(RestartPolicyWithDefaults(*policy), "startup"), absl::Seconds(42));
  beat(kT0 + absl::Minutes(9));
  EXPECT_EQ(d.Check(job, kT0 + absl::Minutes(9)), std::nullopt);
  beat(kT0 + absl::Minutes(10));
  EXPECT_NE(d.Check(job, kT0 + absl::Minutes(10)), std::nullopt);
  // A fixed timeout wins; so does the policy's factor and floor.
  *policy->mutable_phase_timeouts()->mutable_eval() = ToProto(absl::Seconds(30));
  policy->set_stall_factor(1);
  *policy->mutable_stall_floor() = ToProto(absl::Seconds(1));
  EXPECT_EQ(d.PhaseTimeout(RestartPolicyWithDefaults(*policy), "eval"), absl::Seconds(30));
  EXPECT_EQ(d.PhaseTimeout(RestartPolicyWithDefaults(*policy), "step"), absl::Seconds(5));
  StallDetector fixed(kT0);
  fixed.NoteBeats({Beat({0, 0, 10, "eval", {}, 0, false, {}, {}})}, kT0);
  fixed.NoteBeats({Beat({0, 1, 10, "eval", absl::Seconds(30), 0, false, {}, {}})},
                  kT0 + absl::Seconds(30));
  std::optional<StallDetector::Stall> stall = fixed.Check(job, kT0 + absl::Seconds(30));
  ASSERT_TRUE(stall.has_value());
  EXPECT_THAT(stall->cause, HasSubstr("a phase without history or with a fixed timeout"));
}

TEST(StallDetectorTest, ReferencesCarryIntoTheNextGeneration) {
  StallDetector first(kT0);
  first.NoteBeats({Beat({0, 1, 10, "step", {}, 0, false, {}, {{"eval", absl::Seconds(8)}}}),
                   Beat({1, 1, 10, "step", {}, 0, false, {}, {{"eval", absl::Seconds(6)}}})},
                  kT0);
  const StallDetector second = first.ForNextGeneration(kT0 + absl::Minutes(1));
  baton::v1::RestartPolicy explicit_floor;
  *explicit_floor.mutable_stall_floor() = ToProto(absl::Seconds(2));
  const baton::v1::RestartPolicy policy = RestartPolicyWithDefaults(explicit_floor);
  EXPECT_EQ(second.Reference("eval"), absl::Seconds(8));
  EXPECT_EQ(second.PhaseTimeout(policy, "eval"), absl::Seconds(26));
  // Its own ranks' references replace the earlier ones once they report them.
  StallDetector third = second.ForNextGeneration(kT0 + absl::Minutes(2));
  third.NoteBeats({Beat({0, 1, 10, "step", {}, 0, false, {}, {{"eval", absl::Seconds(3)}}})},
                  kT0 + absl::Minutes(2));
  EXPECT_EQ(third.Reference("eval"), absl::Seconds(3));
}

TEST(StallDetectorTest, ARankThatNeverBeatIsInItsStartup) {
  // Rank 1's replacement has not started beating: it is the culprit once the startup's
  // timeout (30 s floor + 3 x 1 s) passed since the generation began.
  const absl::Time start = kT0;
  StallDetector d(start);
  const std::map<std::string, absl::Duration> refs = {{"startup", absl::Seconds(1)}};
  d.NoteBeats({Beat({0, 1, 0, "startup", absl::Seconds(32), 0, true, {}, refs})},
              start + absl::Seconds(32));
  absl::Time heard = start + absl::Seconds(32);
  EXPECT_EQ(d.Check(Job(2), start + absl::Seconds(32), HeardAt(&heard)), std::nullopt);
  d.NoteBeats({Beat({0, 2, 0, "startup", absl::Seconds(33), 0, true, absl::Seconds(1), refs})},
              start + absl::Seconds(33));
  heard = start + absl::Seconds(33);
  std::optional<StallDetector::Stall> stall =
      d.Check(Job(2), start + absl::Seconds(33), HeardAt(&heard));
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->rank, 1);
  EXPECT_EQ(stall->phase, "startup");
  EXPECT_THAT(stall->cause, HasSubstr("rank 0 waits for it"));
}

TEST(StallDetectorTest, EveryRankWaitingNamesTheOneWaitingLongest) {
  StallDetector d(kT0);
  const std::map<std::string, absl::Duration> refs = {{"step", absl::Milliseconds(10)}};
  d.NoteBeats({Beat({0, 1, 7, "step", {}, 29, false, {}, refs}),
               Beat({1, 1, 7, "step", {}, 29, false, {}, refs})},
              kT0);
  const absl::Time t = kT0 + absl::Seconds(5);
  d.NoteBeats({Beat({0, 2, 7, "step", absl::Seconds(4), 30, true, absl::Seconds(4), refs}),
               Beat({1, 2, 7, "step", absl::Seconds(5), 30, true, absl::Seconds(5), refs})},
              t);
  std::optional<StallDetector::Stall> stall = d.Check(Job(2), t);
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->rank, 1);
  EXPECT_THAT(stall->cause, HasSubstr("itself waiting in collective #30 as every live rank is"));
}

TEST(StallDetectorTest, OutputSilenceIsOptIn) {
  baton::v1::Job job = Job(2);
  StallDetector d(kT0);
  d.NoteOutput(0, kT0 + absl::Minutes(1));
  d.NoteOutput(1, kT0 + absl::Minutes(3));
  EXPECT_EQ(d.Check(job, kT0 + absl::Hours(5)), std::nullopt);  // off by default
  *job.mutable_spec()->mutable_restart_policy()->mutable_output_silence() =
      ToProto(absl::Minutes(10));
  EXPECT_EQ(d.Check(job, kT0 + absl::Minutes(12)), std::nullopt);
  std::optional<StallDetector::Stall> stall = d.Check(job, kT0 + absl::Minutes(13));
  ASSERT_TRUE(stall.has_value());
  EXPECT_EQ(stall->rank, 0);
  EXPECT_EQ(stall->evidence, "output-silence");
  EXPECT_THAT(stall->cause, HasSubstr("no rank wrote output for 10m"));
}

}  // namespace
}  // namespace baton::coordinator
