#include "worker/trainer/data/loader/distributed_sampler.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_format.h"
#include "worker/trainer/data/formats/random.h"

namespace baton::trainer {
namespace {

// Uniform integer in [0, bound) without modulo bias (Lemire's rejection method).
uint64_t UniformBelow(uint64_t bound, uint64_t& state) {
  const uint64_t threshold = -bound % bound;
  while (true) {
    const unsigned __int128 m = static_cast<unsigned __int128>(SplitMix64(state)) * bound;
    if (static_cast<uint64_t>(m) >= threshold) return static_cast<uint64_t>(m >> 64);
  }
}

}  // namespace

absl::StatusOr<DistributedSampler> DistributedSampler::Create(int64_t dataset_size, int rank,
                                                              int world_size, int64_t batch_size,
                                                              uint64_t seed) {
  if (world_size <= 0 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d is not in a world of size %d", rank, world_size));
  }
  if (batch_size <= 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("batch_size must be > 0, got %d", batch_size));
  }
  if (dataset_size < int64_t{world_size} * batch_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dataset of %d samples is too small for %d ranks x batch_size %d (no full batch per rank)",
        dataset_size, world_size, batch_size));
  }
  return DistributedSampler(dataset_size, rank, world_size, batch_size, seed,
                            /*global_batch=*/0);
}

absl::StatusOr<DistributedSampler> DistributedSampler::CreateForGlobalBatch(
    int64_t dataset_size, int rank, int world_size, int64_t batch_size, int64_t global_batch,
    uint64_t seed) {
  if (world_size <= 0 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("rank %d is not in a world of size %d", rank, world_size));
  }
  if (batch_size <= 0 || global_batch <= 0 || global_batch % (world_size * batch_size) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "global batch %d is not a multiple of %d ranks x micro-batch %d", global_batch,
        world_size, batch_size));
  }
  if (dataset_size < global_batch) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "dataset of %d samples is smaller than the global batch %d", dataset_size,
        global_batch));
  }
  return DistributedSampler(dataset_size, rank, world_size, batch_size, seed, global_batch);
}

DistributedSampler::DistributedSampler(int64_t dataset_size, int rank, int world_size,
                                       int64_t batch_size, uint64_t seed, int64_t global_batch)
    : dataset_size_(dataset_size),
      rank_(rank),
      world_size_(world_size),
      batch_size_(batch_size),
      seed_(seed),
      global_batch_(global_batch),
      samples_per_rank_(global_batch > 0
                            ? dataset_size / global_batch * (global_batch / world_size)
                            : dataset_size / world_size) {}

std::vector<int64_t> DistributedSampler::Permutation(int64_t n, uint64_t epoch_seed) {
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), int64_t{0});
  uint64_t state = epoch_seed;
  for (int64_t i = n - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(UniformBelow(static_cast<uint64_t>(i) + 1, state));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

std::vector<int64_t> DistributedSampler::EpochIndices(int64_t epoch) const {
  const std::vector<int64_t> perm =
      Permutation(dataset_size_, seed_ + static_cast<uint64_t>(epoch));
  std::vector<int64_t> mine;
  mine.reserve(samples_per_rank_);
  if (global_batch_ > 0) {
    const int64_t share = global_batch_ / world_size_;
    for (int64_t step = 0; step < dataset_size_ / global_batch_; ++step) {
      const int64_t first = step * global_batch_ + rank_ * share;
      mine.insert(mine.end(), perm.begin() + first, perm.begin() + first + share);
    }
    return mine;
  }
  for (int64_t k = 0; k < samples_per_rank_; ++k) mine.push_back(perm[rank_ + k * world_size_]);
  return mine;
}

}  // namespace baton::trainer
