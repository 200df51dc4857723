#include "worker/trainer/data/distributed_sampler.h"

#include <algorithm>
#include <set>
#include <vector>

#include "common/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

std::vector<DistributedSampler> MakeShards(int64_t n, int world, int64_t batch, uint64_t seed) {
  std::vector<DistributedSampler> shards;
  for (int r = 0; r < world; ++r) {
    absl::StatusOr<DistributedSampler> s = DistributedSampler::Create(n, r, world, batch, seed);
    EXPECT_TRUE(s.ok()) << s.status();
    shards.push_back(*s);
  }
  return shards;
}

TEST(DistributedSamplerTest, ShardsAreDisjointAndCoverAllButTheTail) {
  struct Case {
    int64_t n;
    int world;
    int64_t batch;
  };
  for (const Case& c : {Case{100, 1, 10}, Case{100, 3, 8}, Case{1000, 4, 32}, Case{7, 7, 1}}) {
    SCOPED_TRACE(testing::Message() << "n=" << c.n << " world=" << c.world);
    const std::vector<DistributedSampler> shards = MakeShards(c.n, c.world, c.batch, 42);
    const int64_t per_rank = c.n / c.world;
    std::set<int64_t> seen;
    for (const DistributedSampler& s : shards) {
      EXPECT_EQ(s.samples_per_rank(), per_rank);
      EXPECT_EQ(s.batches_per_epoch(), per_rank / c.batch);
      const std::vector<int64_t> mine = s.EpochIndices(3);
      ASSERT_EQ(static_cast<int64_t>(mine.size()), per_rank);
      for (int64_t i : mine) {
        EXPECT_GE(i, 0);
        EXPECT_LT(i, c.n);
        EXPECT_TRUE(seen.insert(i).second) << "index " << i << " in two shards";
      }
    }
    // drop_last: exactly floor(n / world) * world distinct samples are used per epoch.
    EXPECT_EQ(static_cast<int64_t>(seen.size()), per_rank * c.world);
  }
}

TEST(DistributedSamplerTest, RanksTakeStridedEntriesOfOneSharedPermutation) {
  const std::vector<DistributedSampler> shards = MakeShards(10, 3, 1, 9);
  const std::vector<int64_t> perm = DistributedSampler::Permutation(10, 9 + 2);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(shards[r].EpochIndices(2), (std::vector<int64_t>{perm[r], perm[r + 3], perm[r + 6]}));
  }
}

TEST(DistributedSamplerTest, DeterministicPerSeedAndEpoch) {
  const DistributedSampler a = MakeShards(500, 2, 16, 1)[1];
  const DistributedSampler b = MakeShards(500, 2, 16, 1)[1];
  EXPECT_EQ(a.EpochIndices(0), b.EpochIndices(0));
  EXPECT_EQ(a.EpochIndices(5), b.EpochIndices(5));
  EXPECT_NE(a.EpochIndices(0), a.EpochIndices(1));
  const DistributedSampler other_seed = MakeShards(500, 2, 16, 2)[1];
  EXPECT_NE(a.EpochIndices(0), other_seed.EpochIndices(0));
  // seed + epoch, as torch's DistributedSampler: (seed 1, epoch 1) == (seed 2, epoch 0).
  EXPECT_EQ(a.EpochIndices(1), other_seed.EpochIndices(0));
}

TEST(DistributedSamplerTest, PermutationIsAPermutationAndShuffles) {
  const std::vector<int64_t> perm = DistributedSampler::Permutation(1000, 3);
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  int64_t fixed_points = 0;
  for (int64_t i = 0; i < 1000; ++i) fixed_points += perm[i] == i;
  EXPECT_LT(fixed_points, 10);  // Expected 1 for a uniform permutation.
}

TEST(DistributedSamplerTest, RejectsBadArguments) {
  EXPECT_THAT(DistributedSampler::Create(100, 2, 2, 10, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 2")));
  EXPECT_THAT(DistributedSampler::Create(100, 0, 1, 0, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("batch_size")));
  EXPECT_THAT(DistributedSampler::Create(100, 0, 4, 30, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("too small")));
}

}  // namespace
}  // namespace baton::trainer
