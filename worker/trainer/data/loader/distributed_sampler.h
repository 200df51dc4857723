#pragma once

// Which training samples each rank sees, with the semantics of PyTorch's
// `DistributedSampler(shuffle=True, seed=seed, drop_last=True)` + `set_epoch(epoch)`
// followed by a `DataLoader(batch_size=B, drop_last=True)`:
//
//   1. perm = a permutation of [0, N) drawn from seed + epoch; identical on every rank.
//   2. Tail drop: only the first S * W entries are used, S = floor(N / W) (W = world size),
//      so every rank gets exactly S samples: rank r takes perm[r], perm[r + W], ...,
//      perm[r + (S - 1) W]. The shards of one epoch are disjoint and cover S * W samples.
//   3. Batch drop: a rank's S samples form floor(S / B) full batches of B consecutive
//      entries; the last S mod B samples are not used that epoch.
// Hence every rank runs the same number of steps per epoch, which keeps the per-step
// collectives matched. The permutation is our own (SplitMix64 + Fisher-Yates), not
// torch.randperm's: the same seed gives the same order on every platform, but not the
// order PyTorch would produce.
//
// Global-batch mode (CreateForGlobalBatch): the data order no longer depends on the world
// size. Optimizer step s of an epoch consumes perm[s * G, (s + 1) * G) (G = global batch;
// floor(N / G) steps per epoch, the tail dropped), and rank r takes the contiguous slice
// [r * G / W, (r + 1) * G / W) of it, as micro-batches of B consecutive entries. A gang
// resized between two steps therefore continues with exactly the samples an unresized run
// would have used: only their split over the ranks changes.
//
// Plain C++, immutable after construction, thread-safe.

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::trainer {

class DistributedSampler {
 public:
  // INVALID_ARGUMENT unless 0 <= rank < world_size, batch_size > 0 and the dataset gives
  // every rank at least one full batch (dataset_size >= world_size * batch_size).
  static absl::StatusOr<DistributedSampler> Create(int64_t dataset_size, int rank, int world_size,
                                                   int64_t batch_size, uint64_t seed);

  // Global-batch mode (above): `global_batch` samples per optimizer step, split evenly over
  // the ranks, each rank's share in micro-batches of `batch_size`. INVALID_ARGUMENT unless
  // global_batch is a multiple of world_size * batch_size and dataset_size >= global_batch.
  static absl::StatusOr<DistributedSampler> CreateForGlobalBatch(int64_t dataset_size, int rank,
                                                                 int world_size,
                                                                 int64_t batch_size,
                                                                 int64_t global_batch,
                                                                 uint64_t seed);

  // The permutation of [0, n) used for `epoch_seed` (= seed + epoch).
  static std::vector<int64_t> Permutation(int64_t n, uint64_t epoch_seed);

  // This rank's samples_per_rank() indices for `epoch`, in the order they are trained on.
  std::vector<int64_t> EpochIndices(int64_t epoch) const;

  int64_t dataset_size() const { return dataset_size_; }
  int64_t samples_per_rank() const { return samples_per_rank_; }
  // Full batches per rank (= optimizer steps) in one epoch; > 0.
  int64_t batches_per_epoch() const { return samples_per_rank_ / batch_size_; }
  int64_t batch_size() const { return batch_size_; }
  // 0 in torch mode.
  int64_t global_batch() const { return global_batch_; }

 private:
  DistributedSampler(int64_t dataset_size, int rank, int world_size, int64_t batch_size,
                     uint64_t seed, int64_t global_batch);

  int64_t dataset_size_;
  int rank_;
  int world_size_;
  int64_t batch_size_;
  uint64_t seed_;
  int64_t global_batch_;      // 0: torch mode.
  int64_t samples_per_rank_;  // Torch mode: floor(N / W); else floor(N / G) * G / W.
};

}  // namespace baton::trainer
