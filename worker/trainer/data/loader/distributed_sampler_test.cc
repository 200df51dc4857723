#include "worker/trainer/data/loader/distributed_sampler.h"

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "common/spec/global_batch.h"
#include "common/testing/status_matchers.h"
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

// The samples of optimizer step s (over all ranks) do not depend on the world size, so a
// gang resized between steps continues exactly; each step's shares are disjoint.
TEST(GlobalBatchSamplerTest, StepSamplesAreTheSameForEveryWorldSize) {
  constexpr int64_t kN = 1003, kGlobal = 48;
  auto step_samples = [&](int world, int64_t max_micro) {
    const absl::StatusOr<GlobalBatchSplit> split = SplitGlobalBatch(kGlobal, world, max_micro);
    EXPECT_OK(split);
    std::vector<std::set<int64_t>> steps(kN / kGlobal);
    for (int r = 0; r < world; ++r) {
      const absl::StatusOr<DistributedSampler> s = DistributedSampler::CreateForGlobalBatch(
          kN, r, world, split->micro_batch, kGlobal, /*seed=*/7);
      EXPECT_OK(s);
      EXPECT_EQ(s->batches_per_epoch(), (kN / kGlobal) * split->accumulation_steps);
      const std::vector<int64_t> mine = s->EpochIndices(/*epoch=*/2);
      EXPECT_EQ(static_cast<int64_t>(mine.size()), (kN / kGlobal) * (kGlobal / world));
      for (size_t k = 0; k < mine.size(); ++k) {
        EXPECT_TRUE(steps[k / (kGlobal / world)].insert(mine[k]).second) << "duplicate";
      }
    }
    return steps;
  };
  const auto one = step_samples(1, 16);
  for (const auto& step : one) EXPECT_EQ(step.size(), static_cast<size_t>(kGlobal));
  EXPECT_EQ(step_samples(2, 16), one);
  EXPECT_EQ(step_samples(3, 5), one);
  EXPECT_EQ(step_samples(4, 12), one);
  // A different epoch is a different order.
  const absl::StatusOr<DistributedSampler> s =
      DistributedSampler::CreateForGlobalBatch(kN, 0, 1, 16, kGlobal, 7);
  EXPECT_NE(s->EpochIndices(2), s->EpochIndices(3));
}

TEST(GlobalBatchSamplerTest, SplitPicksTheLargestMicroBatchThatFits) {
  auto split = [](int64_t g, int w, int64_t max) {
    const absl::StatusOr<GlobalBatchSplit> s = SplitGlobalBatch(g, w, max);
    EXPECT_OK(s);
    return std::make_pair(s->micro_batch, s->accumulation_steps);
  };
  EXPECT_EQ(split(128, 2, 64), std::make_pair(int64_t{64}, int64_t{1}));
  EXPECT_EQ(split(128, 1, 64), std::make_pair(int64_t{64}, int64_t{2}));
  EXPECT_EQ(split(96, 3, 20), std::make_pair(int64_t{16}, int64_t{2}));
  EXPECT_EQ(split(96, 4, 7), std::make_pair(int64_t{6}, int64_t{4}));
  EXPECT_THAT(SplitGlobalBatch(96, 5, 16),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("over 5 ranks")));
  EXPECT_THAT(DistributedSampler::CreateForGlobalBatch(100, 0, 2, 16, 48, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a multiple")));
  EXPECT_THAT(DistributedSampler::CreateForGlobalBatch(40, 0, 2, 8, 48, 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("smaller than")));
}

}  // namespace
}  // namespace baton::trainer
