#pragma once

// Loader: this rank's stream of training batches, prepared ahead by background threads.
//
// Order. Batches follow the DistributedSampler exactly (torch's DistributedSampler +
// DataLoader(drop_last=True) semantics: shard per rank, reshuffle per epoch from
// seed + epoch, full batches only). Batch k of epoch e holds
// sampler.EpochIndices(e)[k*B, (k+1)*B) and is augmented with a seed derived from
// (LoaderOptions::seed, e, k), so what Next() returns is a pure function of the position,
// independent of thread count and timing. The stream runs through epochs 0, 1, 2, ...
// without end; the caller decides when to stop.
//
// Pipeline. `threads` workers each claim the lowest position not yet claimed, build it with
// Dataset::Get and park it in a reorder buffer; at most `prefetch_batches` batches are
// claimed or ready ahead of the consumer (the bounded queue). Next() hands them out in
// position order. With threads == 0 Next() loads synchronously (no threads at all).
//
// Devices. For a CUDA `device` workers copy each batch into pinned host memory and Next()
// issues a non_blocking copy to the device on the caller's current stream; for the CPU
// batches are returned as built. (Runtime-guarded: Create fails with FAILED_PRECONDITION
// for a CUDA device when LibTorch has no CUDA.)
//
// Position and resume. position() is the position of the batch the next Next() returns
// (epoch, batch_in_epoch); a checkpoint stores it and Seek() (or LoaderOptions::start)
// restores it, so training resumes with exactly the batch that would have come next.
//
// Threading: one consumer thread calls Next(), Seek() and the accessors; the workers are
// internal. The destructor stops and joins the workers (waiting for at most the one
// Dataset::Get call each is in); it is safe at any point, mid-epoch included.

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/time/clock.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/data/loader/distributed_sampler.h"

namespace baton::trainer {

// Where a rank is in its stream of batches.
struct LoaderPosition {
  int64_t epoch = 0;           // >= 0.
  int64_t batch_in_epoch = 0;  // In [0, batches_per_epoch).

  friend bool operator==(const LoaderPosition& a, const LoaderPosition& b) {
    return a.epoch == b.epoch && a.batch_in_epoch == b.batch_in_epoch;
  }
  friend bool operator!=(const LoaderPosition& a, const LoaderPosition& b) { return !(a == b); }
};

// Defaults: TrainerSpec's (common/spec/trainer_spec_defaults.h).
struct LoaderOptions {
  // TrainerSpec.loader_threads; >= 0 (0 = synchronous).
  int threads = static_cast<int>(trainer_spec::kLoaderThreads.default_value);
  // TrainerSpec.prefetch_batches; >= 1.
  int prefetch_batches = static_cast<int>(trainer_spec::kPrefetchBatches.default_value);
  // Augmentation seeds derive from (seed, epoch, batch).
  uint64_t seed = trainer_spec::kSeed.default_value;
  c10::Device device = c10::kCPU;  // Where Next()'s tensors live.
  LoaderPosition start;            // The first batch Next() returns.
  const Clock* clock = nullptr;    // Times wait_time(); nullptr = RealClock.
};

class Loader {
 public:
  // `dataset` is borrowed and must outlive the Loader; `sampler` must have been created
  // for dataset->size(). INVALID_ARGUMENT for bad options or start position,
  // FAILED_PRECONDITION for a CUDA device without CUDA.
  static absl::StatusOr<std::unique_ptr<Loader>> Create(const Dataset* dataset,
                                                        const DistributedSampler& sampler,
                                                        const LoaderOptions& options);

  ~Loader();
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;

  // The batch at position(), then advances. After the last batch of an epoch the next call
  // returns std::nullopt once (end of epoch; position() is then {epoch + 1, 0}) and the
  // call after it the first batch of the next epoch. Blocks until the batch is ready; the
  // time blocked is added to wait_time(). Errors: those of Dataset::Get for this batch;
  // the position stays on it and nothing is prefetched until the next call, which re-reads
  // it (a retry).
  absl::StatusOr<std::optional<Batch>> Next();

  LoaderPosition position() const;

  // Makes `position` the next batch, dropping prefetched batches (and any pending end of
  // epoch marker). INVALID_ARGUMENT if it is out of range.
  absl::Status Seek(LoaderPosition position);

  // Total time Next() spent waiting for data since Create (the data-wait metric).
  absl::Duration wait_time() const;

  int64_t batches_per_epoch() const { return batches_per_epoch_; }
  int64_t batch_size() const { return batch_size_; }

 private:
  Loader(const Dataset* dataset, const DistributedSampler& sampler, const LoaderOptions& options);

  // Global sequence number of a position: epoch * batches_per_epoch + batch_in_epoch.
  int64_t Sequence(LoaderPosition p) const {
    return p.epoch * batches_per_epoch_ + p.batch_in_epoch;
  }
  LoaderPosition PositionOf(int64_t sequence) const {
    return {sequence / batches_per_epoch_, sequence % batches_per_epoch_};
  }
  absl::Status SeekLocked(LoaderPosition position) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Await conditions.
  bool CanClaim() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool NextIsReady() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Builds batch `sequence` (host side: pinned for a CUDA device). Thread-safe.
  absl::StatusOr<Batch> Load(int64_t sequence);
  // The sampler's indices of `epoch`, computed once per epoch and shared. Thread-safe.
  std::shared_ptr<const std::vector<int64_t>> EpochIndices(int64_t epoch);
  void WorkerLoop();
  // Moves a host batch to options_.device (non_blocking for CUDA).
  Batch ToDevice(Batch batch) const;

  const Dataset* const dataset_;
  const DistributedSampler sampler_;
  const LoaderOptions options_;
  const Clock* const clock_;
  const int64_t batches_per_epoch_;
  const int64_t batch_size_;

  mutable absl::Mutex mu_;
  // Consumer state.
  int64_t next_ ABSL_GUARDED_BY(mu_) = 0;  // Sequence of the batch Next() returns.
  bool end_of_epoch_pending_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration wait_time_ ABSL_GUARDED_BY(mu_);
  // Worker state. Invariant: next_ <= claim_ <= next_ + prefetch_batches.
  int64_t claim_ ABSL_GUARDED_BY(mu_) = 0;        // Lowest sequence not yet claimed.
  uint64_t generation_ ABSL_GUARDED_BY(mu_) = 0;  // Bumped by Seek: stale loads are dropped.
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  // Set when Next() returned an error: workers wait for the retry before reloading.
  bool paused_ ABSL_GUARDED_BY(mu_) = false;
  // Finished loads by sequence, each in [next_, claim_).
  absl::flat_hash_map<int64_t, absl::StatusOr<Batch>> ready_ ABSL_GUARDED_BY(mu_);
  // Cache of the last epochs' sampler indices (tiny: at most two epochs in flight).
  std::vector<std::pair<int64_t, std::shared_ptr<const std::vector<int64_t>>>> epoch_cache_
      ABSL_GUARDED_BY(mu_);

  std::vector<std::thread> workers_;
};

}  // namespace baton::trainer
