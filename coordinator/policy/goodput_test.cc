#include "coordinator/policy/goodput.h"

#include <optional>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace baton::coordinator {
namespace {

using ::testing::DoubleEq;
using ::testing::Optional;

const absl::Time kStart = absl::FromUnixSeconds(1000);

baton::v1::MetricPoint Point(int32_t rank, int64_t step, std::optional<double> step_s) {
  baton::v1::MetricPoint p;
  p.set_rank(rank);
  p.set_step(step);
  if (step_s.has_value()) (*p.mutable_values())["time_step_s"] = *step_s;
  return p;
}

ProductiveTime Fold(const std::vector<baton::v1::MetricPoint>& points) {
  ProductiveTime t;
  for (const baton::v1::MetricPoint& p : points) t.Add(p);
  return t;
}

TEST(ProductiveTimeTest, CountsOnlyStepsThatAdvanceRankZerosHighestStep) {
  struct Case {
    const char* name;
    std::vector<baton::v1::MetricPoint> points;
    int64_t max_step;
    double seconds;
  };
  const std::vector<Case> cases = {
      {"none", {}, 0, 0},
      {"one point covers its steps", {Point(0, 10, 0.5)}, 10, 5},
      {"later points add their delta", {Point(0, 10, 0.5), Point(0, 14, 0.25)}, 14, 6},
      {"other ranks ignored", {Point(1, 10, 2.0), Point(0, 4, 1.0), Point(2, 50, 1.0)}, 4, 4},
      // Restored step 8 after reaching 10: 9..10 recomputed, only 11..14 count.
      {"recomputed steps add nothing",
       {Point(0, 10, 0.5), Point(0, 8, 0.5), Point(0, 14, 0.5)}, 14, 7},
      {"same step twice", {Point(0, 10, 0.5), Point(0, 10, 0.5)}, 10, 5},
      // No step time: the step is reached, its time unknown.
      {"point without time_step_s", {Point(0, 10, std::nullopt), Point(0, 12, 1.0)}, 12, 2},
  };
  for (const Case& c : cases) {
    const ProductiveTime t = Fold(c.points);
    EXPECT_EQ(t.max_step, c.max_step) << c.name;
    EXPECT_DOUBLE_EQ(t.seconds, c.seconds) << c.name;
  }
}

TEST(GoodputRatioTest, ProductiveOverWallTimeUntilNow) {
  const ProductiveTime t = Fold({Point(0, 10, 0.5)});
  EXPECT_THAT(GoodputRatio(t, kStart, absl::InfiniteFuture(), kStart + absl::Seconds(12)),
              Optional(DoubleEq(5.0 / 12)));
  EXPECT_THAT(GoodputRatio(t, kStart, absl::InfiniteFuture(), kStart + absl::Seconds(20)),
              Optional(DoubleEq(0.25)));
}

TEST(GoodputRatioTest, FrozenAtTheEndTime) {
  const ProductiveTime t = Fold({Point(0, 10, 0.5)});
  const absl::Time end = kStart + absl::Seconds(10);
  EXPECT_THAT(GoodputRatio(t, kStart, end, end), Optional(DoubleEq(0.5)));
  EXPECT_THAT(GoodputRatio(t, kStart, end, end + absl::Hours(1)), Optional(DoubleEq(0.5)));
}

TEST(GoodputRatioTest, CappedAtOne) {
  // Step times longer than the wall time (the trainer's timer and the coordinator's clock
  // disagree) cannot make goodput exceed 100%.
  const ProductiveTime t = Fold({Point(0, 100, 1.0)});
  EXPECT_THAT(GoodputRatio(t, kStart, absl::InfiniteFuture(), kStart + absl::Seconds(10)),
              Optional(1.0));
}

TEST(GoodputRatioTest, UndefinedBeforeTheStartOrWithoutWallTime) {
  const ProductiveTime t = Fold({Point(0, 10, 0.5)});
  EXPECT_EQ(GoodputRatio(t, absl::InfinitePast(), absl::InfiniteFuture(), kStart),
            std::nullopt);
  EXPECT_EQ(GoodputRatio(t, kStart, absl::InfiniteFuture(), kStart), std::nullopt);
  EXPECT_THAT(GoodputRatio(ProductiveTime(), kStart, absl::InfiniteFuture(),
                           kStart + absl::Seconds(1)),
              Optional(0.0));
}

}  // namespace
}  // namespace baton::coordinator
