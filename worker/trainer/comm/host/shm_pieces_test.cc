#include "worker/trainer/comm/host/shm_pieces.h"

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

TEST(ShmPiecesTest, APieceIsHalfASlotInWholeChunkAlignments) {
  struct Case {
    size_t slot_bytes;
    int64_t element_size;
    int64_t want;
  };
  const std::vector<Case> cases = {
      {size_t{8} << 20, 4, int64_t{1} << 20},  // The default slot, float.
      {size_t{8} << 20, 2, int64_t{2} << 20},
      {256, 8, 16},  // The smallest slot: 16 doubles fill half of it.
      {256, 4, 32},
      {256, 1, 128},
      {320, 8, 16},  // 20 doubles fit: rounded down to the alignment.
      {448, 4, 48},  // 56 floats fit.
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ShmPieceElements(c.slot_bytes, c.element_size), c.want)
        << c.slot_bytes << " bytes, elements of " << c.element_size;
  }
}

TEST(ShmPiecesTest, ChunksSplitAPieceOnAlignedBoundariesTheLastTakingTheRest) {
  struct Case {
    int64_t len;
    int members;
    std::vector<std::pair<int64_t, int64_t>> want;
  };
  const std::vector<Case> cases = {
      {100, 1, {{0, 100}}},
      {100, 3, {{0, 32}, {32, 64}, {64, 100}}},
      {10, 4, {{0, 0}, {0, 0}, {0, 0}, {0, 10}}},  // Too short to share: the last takes all.
      {64, 2, {{0, 32}, {32, 64}}},
      {0, 2, {{0, 0}, {0, 0}}},
  };
  for (const Case& c : cases) {
    for (int i = 0; i < c.members; ++i) {
      EXPECT_EQ(ShmChunkOf(c.len, i, c.members), c.want[i])
          << "chunk " << i << " of " << c.len << " elements, " << c.members << " members";
    }
  }
}

TEST(ShmPiecesTest, ChunksCoverThePieceInOrder) {
  for (const int members : {1, 2, 3, 5, 8, 256}) {
    for (const int64_t len : {int64_t{0}, int64_t{1}, int64_t{15}, int64_t{16}, int64_t{17},
                              int64_t{1000}, int64_t{1} << 20}) {
      int64_t next = 0;
      for (int i = 0; i < members; ++i) {
        const auto [begin, end] = ShmChunkOf(len, i, members);
        ASSERT_EQ(begin, next) << "chunk " << i << " of " << len << ", " << members;
        ASSERT_LE(begin, end) << "chunk " << i << " of " << len << ", " << members;
        ASSERT_EQ(begin % kShmChunkAlign, 0) << "chunk " << i << " of " << len;
        next = end;
      }
      EXPECT_EQ(next, len) << len << " elements, " << members << " members";
    }
  }
}

}  // namespace
}  // namespace baton::trainer
