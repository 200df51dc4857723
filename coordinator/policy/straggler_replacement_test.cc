#include "coordinator/policy/straggler_replacement.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::vector<std::string> Ids(const std::vector<StragglerReplacement>& r) {
  std::vector<std::string> ids;
  for (const StragglerReplacement& x : r) ids.push_back(x.worker_id);
  return ids;
}

TEST(StragglersToReplaceTest, OnlyWhileSparesLastSlowestFirst) {
  const std::vector<std::string> gang = {"w1", "w2", "w3"};
  const std::vector<SlowWorker> slow = {{"w2", 1, 1.6}, {"w3", 2, 2.4}, {"w9", 5, 3.0}};
  // One spare (w4); w5 has too few slots; w6 is benched.
  const absl::Time now = absl::FromUnixSeconds(1000);
  const std::vector<WorkerCapacity> workers =
      WithoutBenched({{"w1", 1}, {"w2", 1}, {"w3", 1}, {"w4", 1}, {"w5", 0}, {"w6", 1}},
                     {{"w6", now + absl::Minutes(1)}}, now);
  const std::vector<StragglerReplacement> r = StragglersToReplace(slow, gang, workers, 1, 1.3, 3);
  EXPECT_THAT(Ids(r), ElementsAre("w3"));  // the slowest; w9 is not in the gang
  EXPECT_THAT(r[0].evidence, HasSubstr("rank 2 at 2.40x the median step time"));
  EXPECT_THAT(r[0].evidence, HasSubstr("above 1.30x at each of its last 3 metric points"));
  // Two spares: both, slowest first.
  EXPECT_THAT(Ids(StragglersToReplace(slow, gang, {{"w4", 1}, {"w7", 2}}, 1, 1.3, 3)),
              ElementsAre("w3", "w2"));
  // No spare, no replacement: a slow worker beats a smaller gang.
  EXPECT_THAT(StragglersToReplace(slow, gang, {{"w1", 1}, {"w2", 1}, {"w3", 1}}, 1, 1.3, 3),
              IsEmpty());
}

TEST(StragglersToReplaceTest, SeveralSlowRanksOnOneWorkerCostOneSpare) {
  const std::vector<StragglerReplacement> r = StragglersToReplace(
      {{"w2", 2, 1.9}, {"w2", 3, 1.8}}, {"w1", "w2"}, {{"w3", 2}, {"w4", 2}}, 2, 1.3, 3);
  EXPECT_THAT(Ids(r), ElementsAre("w2"));
}

TEST(WithoutBenchedTest, UntilTheCoolDownEnds) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  const std::map<std::string, absl::Time> benched = {{"w2", now + absl::Minutes(1)}, {"w3", now}};
  EXPECT_THAT(WithoutBenched({{"w1", 1}, {"w2", 1}, {"w3", 1}}, benched, now),
              ElementsAre(Field(&WorkerCapacity::worker_id, "w1"),
                          Field(&WorkerCapacity::worker_id, "w3")));
}

}  // namespace
}  // namespace baton::coordinator
