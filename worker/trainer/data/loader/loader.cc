#include "worker/trainer/data/loader/loader.h"

#include <ATen/Context.h>

#include <exception>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "common/status_macros.h"
#include "worker/trainer/data/formats/random.h"

namespace baton::trainer {
namespace {

constexpr size_t kEpochCacheSize = 3;

}  // namespace

absl::StatusOr<std::unique_ptr<Loader>> Loader::Create(const Dataset* dataset,
                                                       const DistributedSampler& sampler,
                                                       const LoaderOptions& options) {
  if (dataset == nullptr) return absl::InvalidArgumentError("Loader: no dataset");
  if (sampler.dataset_size() != dataset->size()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("Loader: the sampler is for %d samples but the dataset has %d",
                        sampler.dataset_size(), dataset->size()));
  }
  if (options.threads < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("loader_threads: must be >= 0, got ", options.threads));
  }
  if (options.prefetch_batches < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("prefetch_batches: must be >= 1, got ", options.prefetch_batches));
  }
  if (options.device.is_cuda() && !at::globalContext().hasCUDA()) {
    return absl::FailedPreconditionError(
        absl::StrCat("Loader: device ", options.device.str(), " but LibTorch has no CUDA"));
  }
  std::unique_ptr<Loader> loader(new Loader(dataset, sampler, options));
  {
    absl::MutexLock lock(&loader->mu_);
    RETURN_IF_ERROR(loader->SeekLocked(options.start));
  }
  for (int i = 0; i < options.threads; ++i) {
    loader->workers_.emplace_back([l = loader.get()] { l->WorkerLoop(); });
  }
  return loader;
}

Loader::Loader(const Dataset* dataset, const DistributedSampler& sampler,
               const LoaderOptions& options)
    : dataset_(dataset),
      sampler_(sampler),
      options_(options),
      clock_(options.clock != nullptr ? options.clock : RealClock::Get()),
      batches_per_epoch_(sampler.batches_per_epoch()),
      batch_size_(sampler.batch_size()) {}

Loader::~Loader() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  for (std::thread& t : workers_) t.join();
}

absl::Status Loader::SeekLocked(LoaderPosition position) {
  if (position.epoch < 0 || position.batch_in_epoch < 0 ||
      position.batch_in_epoch >= batches_per_epoch_) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "loader position (epoch %d, batch %d) is out of range (%d batches per epoch)",
        position.epoch, position.batch_in_epoch, batches_per_epoch_));
  }
  next_ = claim_ = Sequence(position);
  end_of_epoch_pending_ = false;
  ++generation_;
  ready_.clear();
  return absl::OkStatus();
}

absl::Status Loader::Seek(LoaderPosition position) {
  absl::MutexLock lock(&mu_);
  return SeekLocked(position);
}

LoaderPosition Loader::position() const {
  absl::MutexLock lock(&mu_);
  return PositionOf(next_);
}

absl::Duration Loader::wait_time() const {
  absl::MutexLock lock(&mu_);
  return wait_time_;
}

bool Loader::CanClaim() const {
  return stop_ || (!paused_ && claim_ < next_ + options_.prefetch_batches);
}

bool Loader::NextIsReady() const { return ready_.contains(next_); }

absl::StatusOr<std::optional<Batch>> Loader::Next() {
  absl::StatusOr<Batch> batch;
  {
    absl::MutexLock lock(&mu_);
    paused_ = false;
    if (end_of_epoch_pending_) {
      end_of_epoch_pending_ = false;
      return std::nullopt;
    }
    const absl::Time start = clock_->Now();
    if (workers_.empty()) {
      const int64_t sequence = next_;
      mu_.Unlock();  // Synchronous: no other thread touches the state meanwhile.
      batch = Load(sequence);
      mu_.Lock();
    } else {
      mu_.Await(absl::Condition(this, &Loader::NextIsReady));
      auto node = ready_.extract(next_);
      batch = std::move(node.mapped());
    }
    wait_time_ += clock_->Now() - start;
    if (!batch.ok()) {
      // Stay on this batch, and reload it (and what follows) only when the caller retries.
      SeekLocked(PositionOf(next_)).IgnoreError();
      paused_ = true;
      return batch.status();
    }
    ++next_;
    if (next_ % batches_per_epoch_ == 0) end_of_epoch_pending_ = true;
  }
  try {
    return std::optional<Batch>(ToDevice(*std::move(batch)));
  } catch (const std::exception& e) {
    return absl::InternalError(
        absl::StrCat("copying a batch to ", options_.device.str(), ": ", e.what()));
  }
}

void Loader::WorkerLoop() {
  while (true) {
    int64_t sequence = 0;
    uint64_t generation = 0;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(this, &Loader::CanClaim));
      if (stop_) return;
      sequence = claim_++;
      generation = generation_;
    }
    absl::StatusOr<Batch> batch = Load(sequence);
    absl::MutexLock lock(&mu_);
    if (stop_) return;
    if (generation != generation_) continue;  // A Seek made it stale.
    ready_.emplace(sequence, std::move(batch));
  }
}

std::shared_ptr<const std::vector<int64_t>> Loader::EpochIndices(int64_t epoch) {
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [e, indices] : epoch_cache_) {
      if (e == epoch) return indices;
    }
  }
  // Computed outside the lock (O(dataset size)); two threads may both compute it.
  auto indices = std::make_shared<const std::vector<int64_t>>(sampler_.EpochIndices(epoch));
  absl::MutexLock lock(&mu_);
  if (epoch_cache_.size() >= kEpochCacheSize) epoch_cache_.erase(epoch_cache_.begin());
  epoch_cache_.emplace_back(epoch, indices);
  return indices;
}

absl::StatusOr<Batch> Loader::Load(int64_t sequence) {
  const LoaderPosition p = PositionOf(sequence);
  const std::shared_ptr<const std::vector<int64_t>> indices = EpochIndices(p.epoch);
  const absl::Span<const int64_t> batch_indices =
      absl::MakeConstSpan(*indices).subspan(p.batch_in_epoch * batch_size_, batch_size_);
  const uint64_t augment_seed = MixSeed(
      {options_.seed, static_cast<uint64_t>(p.epoch), static_cast<uint64_t>(p.batch_in_epoch)});
  try {
    absl::StatusOr<Batch> batch = dataset_->Get(batch_indices, augment_seed);
    if (batch.ok() && options_.device.is_cuda()) {
      batch->input = batch->input.pin_memory();
      batch->target = batch->target.pin_memory();
    }
    return batch;
  } catch (const std::exception& e) {  // c10::Error or std::bad_alloc.
    return absl::InternalError(
        absl::StrFormat("loading batch %d of epoch %d: %s", p.batch_in_epoch, p.epoch, e.what()));
  }
}

Batch Loader::ToDevice(Batch batch) const {
  if (!options_.device.is_cuda()) return batch;
  // From pinned memory, asynchronous on the caller's current stream.
  batch.input = batch.input.to(options_.device, batch.input.scalar_type(), /*non_blocking=*/true);
  batch.target =
      batch.target.to(options_.device, batch.target.scalar_type(), /*non_blocking=*/true);
  return batch;
}

}  // namespace baton::trainer
