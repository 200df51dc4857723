#include "coordinator/policy/slowdown.h"

#include <optional>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace baton::coordinator {
namespace {

using ::testing::DoubleNear;
using ::testing::ElementsAre;
using ::testing::IsEmpty;
using ::testing::Pair;

baton::v1::MetricPoint Point(int64_t generation, int32_t rank, double step_s) {
  baton::v1::MetricPoint p;
  p.set_generation(generation);
  p.set_rank(rank);
  (*p.mutable_values())["time_step_s"] = step_s;
  return p;
}

TEST(SlowdownTest, RecentMeanOverTheMedianOfTheRanks) {
  Slowdown s(/*window=*/2);
  EXPECT_TRUE(s.Add(Point(1, 0, 1.0)));
  EXPECT_THAT(s.Ratios(), IsEmpty());  // one rank: undefined
  s.Add(Point(1, 1, 1.0));
  s.Add(Point(1, 2, 2.0));
  s.Add(Point(1, 2, 4.0));
  s.Add(Point(1, 2, 2.0));  // rank 2's window: {4, 2} -> 3
  EXPECT_THAT(s.Ratios(), ElementsAre(Pair(0, DoubleNear(1.0, 1e-12)),
                                      Pair(1, DoubleNear(1.0, 1e-12)),
                                      Pair(2, DoubleNear(3.0, 1e-12))));
}

TEST(SlowdownTest, NewGenerationStartsOverAndOlderPointsAreIgnored) {
  Slowdown s;
  s.Add(Point(1, 0, 1.0));
  s.Add(Point(1, 1, 3.0));
  EXPECT_TRUE(s.Add(Point(2, 0, 1.0)));
  EXPECT_EQ(s.generation(), 2);
  EXPECT_THAT(s.Ratios(), IsEmpty());
  EXPECT_FALSE(s.Add(Point(1, 1, 3.0)));
  baton::v1::MetricPoint no_time = Point(2, 1, 0);
  no_time.clear_values();
  EXPECT_FALSE(s.Add(no_time));
  EXPECT_THAT(s.Ratios(), IsEmpty());
}

// Feeds rounds of one point per rank (rank i at step_s[i]) and returns what the detector
// reported, in order.
std::vector<StragglerDetector::Straggler> Feed(StragglerDetector& d, int64_t generation,
                                               int rounds, const std::vector<double>& step_s) {
  std::vector<StragglerDetector::Straggler> out;
  for (int round = 0; round < rounds; ++round) {
    for (size_t rank = 0; rank < step_s.size(); ++rank) {
      if (auto s = d.Add(Point(generation, static_cast<int32_t>(rank), step_s[rank]))) {
        out.push_back(*s);
      }
    }
  }
  return out;
}

TEST(SlowdownTest, TheWaitForTheSlowestIsNotARanksOwnWork) {
  // Synchronous data parallelism: every step takes 0.3 s on every rank, but ranks 0 and 1
  // spend 0.2 s of it waiting for rank 2 in the all-reduce.
  Slowdown s(1);
  for (int rank = 0; rank < 3; ++rank) {
    baton::v1::MetricPoint p = Point(1, rank, 0.3);
    (*p.mutable_values())["time_comm_wait_s"] = rank == 2 ? 0.0 : 0.2;
    ASSERT_TRUE(s.Add(p));
  }
  const std::map<int32_t, double> ratios = s.Ratios();
  EXPECT_DOUBLE_EQ(ratios.at(0), 1.0);
  EXPECT_DOUBLE_EQ(ratios.at(2), 3.0);
}

TEST(StragglerDetectorTest, PersistentOnlyWhileStillAboveTheThreshold) {
  StragglerDetector d(2, 1.3);
  for (int i = 0; i < 2; ++i) {
    d.Add(Point(1, 0, 0.1));
    d.Add(Point(1, 1, 0.1));
    d.Add(Point(1, 2, 0.3));
  }
  EXPECT_EQ(d.Persistent().size(), 1u);
  EXPECT_DOUBLE_EQ(d.Persistent().at(2), 3.0);
  d.Add(Point(1, 2, 0.1));  // recovering: its window's mean is still 2x
  EXPECT_EQ(d.Persistent().size(), 1u);
  d.Add(Point(1, 2, 0.1));  // recovered: no longer a straggler now
  EXPECT_TRUE(d.Persistent().empty());
}

TEST(StragglerDetectorTest, ReportsARankAboveTheThresholdForTheWholeWindowOnce) {
  StragglerDetector d(/*window=*/3, /*threshold=*/1.3);
  // Rank 2 is 1.5x the median: reported at its third point, then never again.
  EXPECT_TRUE(Feed(d, 1, 2, {1.0, 1.0, 1.5}).empty());
  std::vector<StragglerDetector::Straggler> got = Feed(d, 1, 5, {1.0, 1.0, 1.5});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].generation, 1);
  EXPECT_EQ(got[0].rank, 2);
  EXPECT_NEAR(got[0].ratio, 1.5, 1e-12);
  // A new generation may report the same rank again.
  got = Feed(d, 2, 3, {1.0, 1.0, 1.5});
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].generation, 2);
  EXPECT_EQ(got[0].rank, 2);
}

TEST(StragglerDetectorTest, ABriefSlowdownOrOneAtTheThresholdIsNotAStraggler) {
  // Exactly at the threshold (window 1: the ratio is 1.3 / 1.0): not above it.
  StragglerDetector at(/*window=*/1, /*threshold=*/1.3);
  EXPECT_TRUE(Feed(at, 1, 5, {1.0, 1.0, 1.3}).empty());

  // Ranks 0 and 2 stay at 1.0 (the median); rank 1's ratio is its window's mean.
  StragglerDetector brief(/*window=*/2, /*threshold=*/1.3);
  EXPECT_TRUE(Feed(brief, 1, 1, {1.0, 1.0, 1.0}).empty());
  EXPECT_FALSE(brief.Add(Point(1, 1, 2.5)).has_value());  // {1, 2.5}: 1.75, 1st above
  EXPECT_FALSE(brief.Add(Point(1, 1, 0.0)).has_value());  // {2.5, 0}: 1.25, count reset
  EXPECT_FALSE(brief.Add(Point(1, 1, 1.0)).has_value());  // {0, 1}: 0.5
  EXPECT_FALSE(brief.Add(Point(1, 1, 2.0)).has_value());  // {1, 2}: 1.5, 1st above
  const std::optional<StragglerDetector::Straggler> s = brief.Add(Point(1, 1, 2.0));
  ASSERT_TRUE(s.has_value());                              // {2, 2}: 2.0, 2nd above
  EXPECT_EQ(s->rank, 1);
  EXPECT_NEAR(s->ratio, 2.0, 1e-12);
}

TEST(StragglerDetectorTest, NeedsTwoRanks) {
  StragglerDetector d(/*window=*/1, /*threshold=*/1.3);
  EXPECT_TRUE(Feed(d, 1, 5, {10.0}).empty());
}

}  // namespace
}  // namespace baton::coordinator
