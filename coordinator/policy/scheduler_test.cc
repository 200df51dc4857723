#include "coordinator/policy/scheduler.h"

#include <string>
#include <vector>

#include "coordinator/policy/rank_assignment.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(AssignRanks, TableForTwoWorkersTwoSlots) {
  const std::vector<RankSlot> got = AssignRanks({"w-a", "w-b"}, 2);
  // rank, local_rank, local_world_size, group_rank, worker
  const std::vector<RankSlot> want = {
      {0, 0, 2, 0, "w-a"},
      {1, 1, 2, 0, "w-a"},
      {2, 0, 2, 1, "w-b"},
      {3, 1, 2, 1, "w-b"},
  };
  EXPECT_EQ(got, want);
}

TEST(AssignRanks, OneSlotPerWorkerMakesRankEqualGroupRank) {
  const std::vector<RankSlot> got = AssignRanks({"a", "b", "c"}, 1);
  ASSERT_EQ(got.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got[i].rank, i);
    EXPECT_EQ(got[i].group_rank, i);
    EXPECT_EQ(got[i].local_rank, 0);
    EXPECT_EQ(got[i].local_world_size, 1);
  }
}

TEST(AssignRanks, EmptyGang) { EXPECT_THAT(AssignRanks({}, 4), IsEmpty()); }

struct ScheduleCase {
  std::string name;
  std::vector<PendingJob> queue;
  std::vector<WorkerCapacity> workers;
  std::vector<Placement> want;
};

class ScheduleTest : public ::testing::TestWithParam<ScheduleCase> {};

TEST_P(ScheduleTest, Decides) {
  const ScheduleCase& c = GetParam();
  EXPECT_EQ(Schedule(c.queue, c.workers), c.want);
}

INSTANTIATE_TEST_SUITE_P(
    Table, ScheduleTest,
    ::testing::Values(
        ScheduleCase{"gang_waits_for_min", {{"j1", 2, 2, 1}}, {{"w1", 1}}, {}},
        ScheduleCase{"gang_starts_at_min", {{"j1", 2, 2, 1}}, {{"w2", 1}, {"w1", 1}},
                     {{"j1", {"w1", "w2"}}}},
        ScheduleCase{"takes_up_to_max_lowest_ids",
                     {{"j1", 1, 2, 1}},
                     {{"w3", 1}, {"w1", 1}, {"w2", 1}},
                     {{"j1", {"w1", "w2"}}}},
        ScheduleCase{"needs_slots_per_worker_on_each",
                     {{"j1", 2, 2, 2}},
                     {{"w1", 2}, {"w2", 1}},
                     {}},
        ScheduleCase{"fifo_consumes_capacity",
                     {{"j1", 2, 2, 1}, {"j2", 1, 1, 1}},
                     {{"w1", 1}, {"w2", 1}},
                     {{"j1", {"w1", "w2"}}}},
        ScheduleCase{"two_jobs_share_a_worker_with_free_slots",
                     {{"j1", 1, 1, 1}, {"j2", 1, 1, 1}},
                     {{"w1", 2}},
                     {{"j1", {"w1"}}, {"j2", {"w1"}}}},
        ScheduleCase{"backfill_small_job_behind_big_one",
                     {{"big", 3, 3, 1}, {"small", 1, 1, 1}},
                     {{"w1", 1}, {"w2", 1}},
                     {{"small", {"w1"}}}},
        ScheduleCase{"no_workers", {{"j1", 1, 1, 1}}, {}, {}}),
    [](const ::testing::TestParamInfo<ScheduleCase>& info) { return info.param.name; });

// PlaceRestart, table-driven: previous gang, free slots per worker, min/max -> new gang.
TEST(PlaceRestart, Table) {
  struct Case {
    const char* name;
    std::vector<std::string> previous;
    std::vector<WorkerCapacity> workers;
    int min, max;
    std::vector<std::string> want;
  };
  const std::vector<Case> cases = {
      {"all survive: same places", {"w2", "w1"}, {{"w1", 1}, {"w2", 1}}, 2, 2, {"w2", "w1"}},
      {"middle lost, none new: later survivors move down",
       {"w1", "w2", "w3"}, {{"w1", 1}, {"w3", 1}}, 2, 3, {"w1", "w3"}},
      {"lost worker replaced in its place",
       {"w1", "w2", "w3"}, {{"w1", 1}, {"w3", 1}, {"w9", 1}, {"w4", 1}}, 2, 3,
       {"w1", "w4", "w3"}},
      {"grows to max with new workers at the end",
       {"w1"}, {{"w1", 1}, {"w3", 1}, {"w2", 1}}, 1, 3, {"w1", "w2", "w3"}},
      {"too few: empty", {"w1", "w2", "w3"}, {{"w1", 1}}, 2, 3, {}},
      {"busy worker does not fit", {"w1", "w2"}, {{"w1", 1}, {"w2", 0}, {"w5", 1}}, 2, 2,
       {"w1", "w5"}},
      {"survivors preferred when capped", {"w3", "w4"}, {{"w1", 1}, {"w3", 1}, {"w4", 1}}, 1, 2,
       {"w3", "w4"}},
  };
  for (const Case& c : cases) {
    PendingJob job;
    job.job_id = "j";
    job.min_workers = c.min;
    job.max_workers = c.max;
    job.slots_per_worker = 1;
    EXPECT_EQ(PlaceRestart(c.previous, job, c.workers), c.want) << c.name;
  }
}

}  // namespace
}  // namespace baton::coordinator
