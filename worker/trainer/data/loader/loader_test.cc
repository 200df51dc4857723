#include "worker/trainer/data/loader/loader.h"

#include <ATen/ATen.h>

#include <atomic>
#include <memory>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

// Batch input = the indices (int64 [B]); target = augment_seed repeated (int64 [B]).
// Optionally: the first Get of `hold_index` blocks until `release_after` other Gets have
// finished (forcing out-of-order completion); `fail_index` fails until allowed; each Get
// advances `clock` by one second.
class FakeDataset final : public Dataset {
 public:
  explicit FakeDataset(int64_t size) : size_(size) { info_.name = "fake"; }

  int64_t size() const override { return size_; }
  const DatasetInfo& info() const override { return info_; }

  absl::StatusOr<Batch> Get(absl::Span<const int64_t> indices,
                            uint64_t augment_seed) const override {
    in_flight_.fetch_add(1);
    calls_.fetch_add(1);
    const bool holds = std::find(indices.begin(), indices.end(), hold_index) != indices.end();
    if (holds && !held_.exchange(true)) {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](const FakeDataset* d) { return d->finished_ >= d->release_after; }, this));
    }
    if (clock != nullptr) clock->Advance(absl::Seconds(1));
    absl::StatusOr<Batch> out;
    if (std::find(indices.begin(), indices.end(), fail_index) != indices.end() &&
        !allow_failing_index.load()) {
      out = absl::DataLossError("broken sample");
    } else {
      std::vector<int64_t> copy(indices.begin(), indices.end());
      const auto b = static_cast<int64_t>(indices.size());
      out = Batch{at::tensor(copy, at::kLong),
                  at::full({b}, static_cast<int64_t>(augment_seed >> 1), at::kLong)};
    }
    {
      absl::MutexLock lock(&mu_);
      ++finished_;
    }
    in_flight_.fetch_sub(1);
    return out;
  }

  int64_t hold_index = -1;
  int release_after = 0;
  int64_t fail_index = -1;
  std::atomic<bool> allow_failing_index{false};
  FakeClock* clock = nullptr;
  mutable std::atomic<int> in_flight_{0};
  mutable std::atomic<int> calls_{0};

 private:
  const int64_t size_;
  DatasetInfo info_;
  mutable std::atomic<bool> held_{false};
  mutable absl::Mutex mu_;
  mutable int finished_ = 0;
};

DistributedSampler MustSampler(int64_t n, int rank, int world, int64_t batch, uint64_t seed) {
  absl::StatusOr<DistributedSampler> s = DistributedSampler::Create(n, rank, world, batch, seed);
  EXPECT_OK(s);
  return *s;
}

std::unique_ptr<Loader> MustLoader(const Dataset& d, const DistributedSampler& s, LoaderOptions o) {
  absl::StatusOr<std::unique_ptr<Loader>> l = Loader::Create(&d, s, o);
  EXPECT_OK(l);
  return l.ok() ? *std::move(l) : nullptr;
}

// Next() that must return a batch.
Batch MustNext(Loader& l) {
  absl::StatusOr<std::optional<Batch>> b = l.Next();
  EXPECT_OK(b);
  if (!b.ok() || !b->has_value()) {
    ADD_FAILURE() << "expected a batch";
    return Batch{at::empty({0}, at::kLong), at::empty({0}, at::kLong)};
  }
  return **b;
}

void ExpectEndOfEpoch(Loader& l) {
  absl::StatusOr<std::optional<Batch>> b = l.Next();
  ASSERT_OK(b);
  EXPECT_FALSE(b->has_value()) << "expected the end of the epoch";
}

std::vector<int64_t> ToVector(const at::Tensor& t) {
  return std::vector<int64_t>(t.data_ptr<int64_t>(), t.data_ptr<int64_t>() + t.numel());
}

TEST(LoaderTest, YieldsSamplerOrderWithManyThreadsAndOutOfOrderLoads) {
  // 103 samples, rank 1 of 2, batch 5: 51 per rank, 10 batches per epoch.
  FakeDataset d(103);
  d.hold_index = -2;  // Set below to the first batch's first index.
  const DistributedSampler sampler = MustSampler(103, 1, 2, 5, 42);
  const std::vector<int64_t> epoch0 = sampler.EpochIndices(0);
  d.hold_index = epoch0[0];
  d.release_after = 2;  // Batch 0 finishes only after two later batches did.
  std::unique_ptr<Loader> threaded =
      MustLoader(d, sampler, {.threads = 4, .prefetch_batches = 3, .seed = 7});
  FakeDataset plain_data(103);
  std::unique_ptr<Loader> sync = MustLoader(plain_data, sampler, {.threads = 0, .seed = 7});
  ASSERT_EQ(threaded->batches_per_epoch(), 10);

  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    const std::vector<int64_t> indices = sampler.EpochIndices(epoch);
    for (int64_t k = 0; k < 10; ++k) {
      EXPECT_EQ(threaded->position(), (LoaderPosition{epoch, k}));
      const Batch a = MustNext(*threaded);
      const Batch b = MustNext(*sync);
      EXPECT_EQ(ToVector(a.input),
                std::vector<int64_t>(indices.begin() + 5 * k, indices.begin() + 5 * k + 5))
          << "epoch " << epoch << " batch " << k;
      EXPECT_TRUE(a.input.equal(b.input));
      EXPECT_TRUE(a.target.equal(b.target)) << "augmentation seed differs";
    }
    EXPECT_EQ(threaded->position(), (LoaderPosition{epoch + 1, 0}));
    ExpectEndOfEpoch(*threaded);
    ExpectEndOfEpoch(*sync);
  }
}

TEST(LoaderTest, AugmentationSeedsDifferPerBatchAndEpoch) {
  FakeDataset d(40);
  const DistributedSampler sampler = MustSampler(40, 0, 1, 10, 1);
  std::unique_ptr<Loader> l = MustLoader(d, sampler, {.threads = 2});
  std::vector<int64_t> seeds;
  for (int i = 0; i < 9; ++i) {
    absl::StatusOr<std::optional<Batch>> b = l->Next();
    ASSERT_OK(b);
    if (b->has_value()) seeds.push_back((*b)->target[0].item<int64_t>());
  }
  ASSERT_EQ(seeds.size(), 8u);
  std::sort(seeds.begin(), seeds.end());
  EXPECT_EQ(std::unique(seeds.begin(), seeds.end()), seeds.end());
}

TEST(LoaderTest, ResumesExactlyAtASeekedPosition) {
  FakeDataset d(64);
  const DistributedSampler sampler = MustSampler(64, 0, 1, 4, 5);  // 16 batches per epoch.
  std::unique_ptr<Loader> first = MustLoader(d, sampler, {.threads = 3, .prefetch_batches = 2});
  for (int i = 0; i < 14; ++i) MustNext(*first);
  const LoaderPosition saved = first->position();
  EXPECT_EQ(saved, (LoaderPosition{0, 14}));
  std::vector<Batch> expected;
  for (int i = 0; i < 5; ++i) {
    absl::StatusOr<std::optional<Batch>> b = first->Next();
    ASSERT_OK(b);
    if (b->has_value()) expected.push_back(**b);  // Crosses the epoch boundary.
  }
  ASSERT_EQ(expected.size(), 4u);

  // A new loader started at the saved position (a restored checkpoint) ...
  std::unique_ptr<Loader> resumed =
      MustLoader(d, sampler, {.threads = 4, .prefetch_batches = 3, .start = saved});
  // ... and the old one seeked back, with batches in its queue.
  ASSERT_OK(first->Seek(saved));
  for (Loader* l : {resumed.get(), first.get()}) {
    for (size_t i = 0; i < expected.size(); ++i) {
      if (i == 2) ExpectEndOfEpoch(*l);
      const Batch b = MustNext(*l);
      EXPECT_TRUE(b.input.equal(expected[i].input)) << i;
      EXPECT_TRUE(b.target.equal(expected[i].target)) << i;
    }
  }
  EXPECT_THAT(first->Seek({0, 16}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of range")));
  EXPECT_THAT(first->Seek({-1, 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of range")));
}

TEST(LoaderTest, DestructorIsCleanMidEpoch) {
  FakeDataset d(1000);
  const DistributedSampler sampler = MustSampler(1000, 0, 1, 10, 1);
  {
    std::unique_ptr<Loader> l = MustLoader(d, sampler, {.threads = 4, .prefetch_batches = 2});
    MustNext(*l);
    MustNext(*l);
  }
  EXPECT_EQ(d.in_flight_.load(), 0);
  const int calls = d.calls_.load();
  EXPECT_LE(calls, 2 + 2 + 4);  // Consumed + queue + at most one stale load per thread.
  // Destroyed before any batch was taken, and with no worker threads.
  { MustLoader(d, sampler, {.threads = 8, .prefetch_batches = 1}); }
  { MustLoader(d, sampler, {.threads = 0}); }
  EXPECT_EQ(d.in_flight_.load(), 0);
}

TEST(LoaderTest, DatasetErrorsSurfaceAtTheirBatchAndCanBeRetried) {
  FakeDataset d(30);
  const DistributedSampler sampler = MustSampler(30, 0, 1, 3, 2);
  const std::vector<int64_t> order = sampler.EpochIndices(0);
  d.fail_index = order[3 * 4];  // The first sample of batch 4.
  std::unique_ptr<Loader> l = MustLoader(d, sampler, {.threads = 2, .prefetch_batches = 4});
  for (int i = 0; i < 4; ++i) MustNext(*l);
  EXPECT_THAT(l->Next(), StatusIs(absl::StatusCode::kDataLoss, HasSubstr("broken")));
  EXPECT_EQ(l->position(), (LoaderPosition{0, 4}));
  d.allow_failing_index = true;
  const Batch b = MustNext(*l);
  EXPECT_EQ(b.input[0].item<int64_t>(), order[12]);
  EXPECT_EQ(l->position(), (LoaderPosition{0, 5}));
}

TEST(LoaderTest, CountsTimeWaitedForData) {
  FakeClock clock;
  FakeDataset d(20);
  d.clock = &clock;
  const DistributedSampler sampler = MustSampler(20, 0, 1, 5, 1);
  std::unique_ptr<Loader> l = MustLoader(d, sampler, {.threads = 0, .clock = &clock});
  EXPECT_EQ(l->wait_time(), absl::ZeroDuration());
  for (int i = 0; i < 3; ++i) MustNext(*l);
  EXPECT_EQ(l->wait_time(), absl::Seconds(3));
}

TEST(LoaderTest, RejectsBadOptions) {
  FakeDataset d(20);
  const DistributedSampler sampler = MustSampler(20, 0, 1, 5, 1);
  EXPECT_THAT(Loader::Create(&d, sampler, {.prefetch_batches = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("prefetch_batches")));
  EXPECT_THAT(Loader::Create(&d, sampler, {.threads = -1}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("loader_threads")));
  EXPECT_THAT(Loader::Create(&d, sampler, {.start = {0, 4}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("out of range")));
  FakeDataset other(21);
  EXPECT_THAT(Loader::Create(&other, sampler, {}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("sampler")));
  if (!at::hasCUDA()) {
    EXPECT_THAT(Loader::Create(&d, sampler, {.device = c10::Device(c10::kCUDA, 0)}),
                StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no CUDA")));
  }
}

}  // namespace
}  // namespace baton::trainer
