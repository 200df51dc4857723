#include "coordinator/policy/stall_detector.h"

#include <optional>
#include <string>
#include <vector>

#include "common/time/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

const absl::Time kT0 = absl::FromUnixSeconds(1'000'000);

// A job of `ranks` ranks on workers w0, w1, ...; `exited` ranks have an exit.
baton::v1::Job Job(int ranks, std::vector<int> exited = {}) {
  baton::v1::Job job;
  job.mutable_spec()->mutable_restart_policy()->set_stall_factor(10);
  *job.mutable_spec()->mutable_restart_policy()->mutable_stall_floor() = ToProto(absl::Seconds(30));
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

TEST(StallDetectorTest, NoStepsNoStall) {
  StallDetector d;
  EXPECT_EQ(d.Check(Job(2), kT0 + absl::Hours(10)), std::nullopt);
}

TEST(StallDetectorTest, Table) {
  struct Case {
    std::string name;
    std::vector<int> exited;
    absl::Duration silence;  // after the last progress
    std::optional<int> want_rank;
    std::string want_cause;
  };
  // Rank 0 steps every 10 s up to step 5; rank 1 stops at step 3. Median step time 10 s,
  // so the timeout is max(10 x 10 s, 30 s) = 100 s after the last progress (rank 0's).
  const std::vector<Case> cases = {
      {"within the timeout", {}, absl::Seconds(99), std::nullopt, ""},
      {"past it: the rank that stopped first",
       {},
       absl::Seconds(100),
       1,
       "rank 1 on worker w1 stopped first at step 3"},
      {"an exited rank is never the suspect",
       {1},
       absl::Seconds(100),
       0,
       "rank 0 on worker w0 stopped first at step 5"},
      {"a live rank without steps stopped before any",
       {},
       absl::Seconds(100),
       2,
       "before its first step"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const int ranks = c.name.find("without steps") != std::string::npos ? 3 : 2;
    StallDetector d;
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
    EXPECT_THAT(stall->cause, HasSubstr(c.want_cause));
    EXPECT_THAT(stall->cause,
                HasSubstr("stall timeout 1m40s = max(10 x median step time 10s, 30s)"));
  }
}

}  // namespace
}  // namespace baton::coordinator
