#include "worker/trainer/zero/shard_layout.h"

#include <cstdint>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

ShardLayout Layout(std::vector<int64_t> numels, int world, int64_t align = 1) {
  absl::StatusOr<ShardLayout> layout = ShardLayout::Create(std::move(numels), world, align);
  EXPECT_OK(layout);
  return *std::move(layout);
}

// The flat buffer of a layout as its saved shards, element e holding 1000 + e (padding -1).
std::vector<std::vector<int64_t>> Shards(const ShardLayout& layout) {
  std::vector<std::vector<int64_t>> shards(layout.world_size());
  for (int r = 0; r < layout.world_size(); ++r) {
    for (int64_t i = 0; i < layout.shard_numel(); ++i) {
      const int64_t e = layout.shard_begin(r) + i;
      shards[r].push_back(e < layout.total_numel() ? 1000 + e : -1);
    }
  }
  return shards;
}

TEST(ShardLayoutTest, PadsAtTheEndToEqualShards) {
  const ShardLayout layout = Layout({4, 3}, 3);
  EXPECT_EQ(layout.total_numel(), 7);
  EXPECT_EQ(layout.shard_numel(), 3);
  EXPECT_EQ(layout.padded_numel(), 9);
  EXPECT_EQ(layout.padding(), 2);
  EXPECT_EQ(layout.param_offset(1), 4);
  EXPECT_EQ(layout.shard_real_numel(0), 3);
  EXPECT_EQ(layout.shard_real_numel(2), 1);
  // Parameter 0 straddles shards 0 and 1, parameter 1 shards 1 and 2.
  EXPECT_THAT(layout.Pieces(0), ElementsAre(ShardPiece{0, 0, 0, 3}));
  EXPECT_THAT(layout.Pieces(1), ElementsAre(ShardPiece{0, 3, 0, 1}, ShardPiece{1, 0, 1, 2}));
  EXPECT_THAT(layout.Pieces(2), ElementsAre(ShardPiece{1, 2, 0, 1}));
}

TEST(ShardLayoutTest, AlignmentRoundsEveryShardUp) {
  const ShardLayout layout = Layout({10, 7}, 2, /*align=*/16);
  EXPECT_EQ(layout.shard_numel(), 16);
  EXPECT_EQ(layout.padding(), 15);
  EXPECT_THAT(layout.Pieces(0), ElementsAre(ShardPiece{0, 0, 0, 10}, ShardPiece{1, 0, 10, 6}));
  EXPECT_THAT(layout.Pieces(1), ElementsAre(ShardPiece{1, 6, 0, 1}));
  EXPECT_EQ(Layout({32}, 2, 16).padding(), 0);
}

TEST(ShardLayoutTest, ManyParametersSmallerThanAShardAndEmptyOnes) {
  // Five parameters, two of them empty, over 2 ranks: shards of 4.
  const ShardLayout layout = Layout({0, 2, 0, 1, 5}, 2);
  EXPECT_EQ(layout.shard_numel(), 4);
  EXPECT_THAT(layout.Pieces(0),
              ElementsAre(ShardPiece{1, 0, 0, 2}, ShardPiece{3, 0, 2, 1}, ShardPiece{4, 0, 3, 1}));
  EXPECT_THAT(layout.Pieces(1), ElementsAre(ShardPiece{4, 1, 0, 4}));
}

TEST(ShardLayoutTest, PiecesCoverEveryElementOnce) {
  for (int world : {1, 2, 3, 4, 7}) {
    for (int64_t align : {1, 4}) {
      const std::vector<int64_t> numels = {5, 0, 1, 12, 3, 0, 8};
      const ShardLayout layout = Layout(numels, world, align);
      std::vector<int> seen(layout.total_numel(), 0);
      for (int r = 0; r < world; ++r) {
        int64_t next = 0;  // Pieces are in order and contiguous from the shard's start.
        for (const ShardPiece& p : layout.Pieces(r)) {
          EXPECT_EQ(p.shard_offset, next);
          EXPECT_GT(p.length, 0);
          EXPECT_LE(p.param_offset + p.length, numels[p.param]);
          next += p.length;
          for (int64_t k = 0; k < p.length; ++k) {
            ++seen[layout.param_offset(p.param) + p.param_offset + k];
          }
        }
        EXPECT_EQ(next, layout.shard_real_numel(r)) << "world " << world << " rank " << r;
      }
      for (int count : seen) EXPECT_EQ(count, 1);
    }
  }
}

TEST(ShardLayoutTest, NoParameters) {
  const ShardLayout layout = Layout({}, 3);
  EXPECT_EQ(layout.shard_numel(), 0);
  EXPECT_EQ(layout.padded_numel(), 0);
  EXPECT_TRUE(layout.Pieces(1).empty());
  const ShardLayout empties = Layout({0, 0}, 2, 16);
  EXPECT_EQ(empties.shard_numel(), 0);
  EXPECT_TRUE(empties.Pieces(0).empty());
  absl::StatusOr<std::vector<int64_t>> shard =
      RecutShard<int64_t>(layout, {{}, {}, {}}, Layout({}, 2), 1);
  ASSERT_OK(shard);
  EXPECT_TRUE(shard->empty());
}

TEST(ShardLayoutTest, RejectsBadArguments) {
  EXPECT_THAT(ShardLayout::Create({1}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("world size 0")));
  EXPECT_THAT(ShardLayout::Create({1}, 2, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("alignment 0")));
  EXPECT_THAT(ShardLayout::Create({1, -2}, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("parameter 1 has -2")));
  const int64_t big = int64_t{1} << 62;
  EXPECT_OK(ShardLayout::Create({big, big / 2}, 2));
  // The elements overflow, or only the padded buffer does.
  EXPECT_THAT(ShardLayout::Create({big, big}, 2),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("2^63")));
  EXPECT_THAT(ShardLayout::Create({big, big - 1}, 2),
              StatusIs(absl::StatusCode::kOutOfRange, HasSubstr("padding")));
}

// Re-cutting world size N's saved shards for world size M gives exactly the shards a job
// of M ranks would have written: checked element by element for the cases elastic restores
// meet.
TEST(ShardLayoutTest, RecutMatchesTheNewLayoutsShards) {
  struct Case {
    int from, to;
    int64_t from_align, to_align;
  };
  const std::vector<int64_t> numels = {7, 1, 0, 13, 2};  // 23 elements.
  for (const Case c : std::vector<Case>{{2, 3, 1, 1},
                                        {3, 2, 1, 1},
                                        {1, 4, 1, 1},
                                        {4, 1, 1, 1},
                                        {3, 3, 1, 1},
                                        {2, 5, 4, 1},
                                        {5, 2, 1, 8},
                                        {23, 2, 1, 1},
                                        {2, 30, 1, 1}}) {
    SCOPED_TRACE(
        absl::StrCat(c.from, " -> ", c.to, " (align ", c.from_align, " -> ", c.to_align, ")"));
    const ShardLayout from = Layout(numels, c.from, c.from_align);
    const ShardLayout to = Layout(numels, c.to, c.to_align);
    const std::vector<std::vector<int64_t>> want = Shards(to);
    for (int r = 0; r < c.to; ++r) {
      absl::StatusOr<std::vector<int64_t>> got =
          RecutShard<int64_t>(from, Shards(from), to, r, /*pad=*/-1);
      ASSERT_OK(got);
      EXPECT_EQ(*got, want[r]) << "rank " << r;
    }
  }
}

TEST(ShardLayoutTest, RecutSourcesNameTheSavedShards) {
  // 10 elements: at 2 ranks shards [0,5) [5,10); at 3 ranks [0,4) [4,8) [8,10)+2 padding.
  const ShardLayout two = Layout({6, 4}, 2);
  const ShardLayout three = Layout({6, 4}, 3);
  EXPECT_THAT(*RecutSources(two, three, 1),
              ElementsAre(RecutSource{0, 4, 0, 1}, RecutSource{1, 0, 1, 3}));
  EXPECT_THAT(*RecutSources(two, three, 2), ElementsAre(RecutSource{1, 3, 0, 2}));
  EXPECT_THAT(*RecutSources(three, two, 1),
              ElementsAre(RecutSource{1, 1, 0, 3}, RecutSource{2, 0, 3, 2}));
}

TEST(ShardLayoutTest, RecutThereAndBackIsTheIdentity) {
  const std::vector<int64_t> numels = {3, 0, 9, 4, 1};
  for (int n : {1, 2, 3, 4}) {
    for (int m : {1, 2, 3, 5, 8}) {
      const ShardLayout a = Layout(numels, n);
      const ShardLayout b = Layout(numels, m, 4);
      const std::vector<std::vector<int64_t>> saved = Shards(a);
      std::vector<std::vector<int64_t>> there;
      for (int r = 0; r < m; ++r) there.push_back(*RecutShard<int64_t>(a, saved, b, r, -1));
      for (int r = 0; r < n; ++r) {
        EXPECT_EQ(*RecutShard<int64_t>(b, there, a, r, -1), saved[r])
            << n << " -> " << m << " -> " << n << " rank " << r;
      }
    }
  }
}

TEST(ShardLayoutTest, RecutRejectsStateOfOtherParametersOrShape) {
  const ShardLayout from = Layout({4, 4}, 2);
  EXPECT_THAT(RecutSources(from, Layout({4, 5}, 2), 0),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("saved state")));
  EXPECT_THAT(RecutSources(from, Layout({8}, 2), 0),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(RecutSources(from, Layout({4, 4}, 3), 3),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 3 not in world of 3")));
  EXPECT_THAT(RecutShard<float>(from, {{1, 2, 3, 4}}, Layout({4, 4}, 3), 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("1 saved shards")));
  EXPECT_THAT(RecutShard<float>(from, {{1, 2, 3, 4}, {1, 2, 3}}, Layout({4, 4}, 3), 0),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("saved shard 1 has 3 elements, not 4")));
}

}  // namespace
}  // namespace baton::trainer
