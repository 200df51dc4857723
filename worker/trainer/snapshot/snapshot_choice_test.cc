#include "worker/trainer/snapshot/snapshot_choice.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

struct Case {
  const char* name;
  std::vector<SnapshotOffer> offers;
  int64_t disk_step;
  int64_t disk_generation;
  int expected_rank;  // -1: none.
};

TEST(ChooseSnapshot, Table) {
  const std::vector<Case> cases = {
      {"no offers", {}, 0, 0, -1},
      {"nobody has one", {{0, -1, 0}, {1, -1, 0}}, 0, 0, -1},
      {"the newest step wins", {{0, 2, 41}, {1, 2, 42}}, 0, 0, 1},
      {"equal offers: the lowest rank", {{3, 2, 42}, {1, 2, 42}, {2, 2, 42}}, 0, 0, 1},
      {"a newer generation beats a superseded one's later step", {{0, 1, 90}, {1, 2, 60}}, 0, 0, 1},
      {"not newer than the disk checkpoint", {{0, 2, 50}}, 50, 2, -1},
      {"newer than the disk checkpoint", {{0, 2, 51}}, 50, 2, 0},
      {"older generation than the disk checkpoint", {{0, 1, 70}}, 50, 2, -1},
      {"newer generation, later step", {{0, 3, 51}, {1, 1, 99}}, 50, 2, 0},
  };
  for (const Case& c : cases) {
    const std::optional<SnapshotOffer> got =
        ChooseSnapshot(c.offers, c.disk_step, c.disk_generation);
    EXPECT_EQ(got.has_value() ? got->rank : -1, c.expected_rank) << c.name;
  }
}

}  // namespace
}  // namespace baton::trainer
