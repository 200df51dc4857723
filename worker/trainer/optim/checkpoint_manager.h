#pragma once

// Full training-state checkpoints: everything needed to resume training bit-for-bit.
//
// Files. Rank 0 writes <dir>/ckpt-<step, 8+ digits>.pt (e.g. ckpt-00000120.pt) with
// WriteFileAtomically, then deletes step checkpoints of LATER steps (an abandoned timeline:
// files skipped as corrupt at restore, or an earlier run's), all but the newest `keep` of
// the rest, and any temporary files that crashed writers left behind. Each file is a
// sealed archive (checkpoint_file.h: a ZIP + length/CRC-32 trailer) holding a pickled
// dict that Python's torch.load(path) reads:
//
//   "format": "baton-checkpoint-v1"
//   "step", "epoch", "batch_in_epoch", "samples_seen", "world_size",
//   "scaler_growth_tracker": int          "scaler_scale": float
//   "model": {name: Tensor}               parameters and buffers (detached, contiguous, CPU)
//   "optimizer_type": "sgd" | "adamw" | "none" | "other"
//   "optimizer_params": int               parameters the optimizer holds
//   "optimizer": uint8 Tensor             torch::optim::Optimizer::save archive (a
//                                         TorchScript-style ZIP); empty when none
//   "rng_cpu": uint8 Tensor               the default CPU generator state
//   "rng_cuda": [uint8 Tensor]            default CUDA generator states, one per device
//   "rng_extra": uint8 Tensor             the caller's opaque bytes (e.g. std::mt19937)
//
// Restore. Every rank calls RestoreLatest at start: it tries the step checkpoints newest
// first and loads the first one that passes the trailer check AND decodes; files failing
// either are skipped with a warning (never loaded). Temporary files are never considered.
// All ranks see the same files, so they pick the same checkpoint; a loop that wants to be
// defensive can all-reduce the restored step and fail on disagreement.
//
// RNG. Save captures the calling process's generators (rank 0's); Restore sets every
// restoring process's generators to them. Rank-dependent random streams therefore need
// to be derived from (seed, rank, step) by the caller, not kept in the global generator.
//
// Threading: a CheckpointManager has no mutable state after Create; its methods may be
// called from one thread at a time per directory (the training loop's). Save blocks on
// serialisation and fsync; EncodeCheckpoint + CommitCheckpoint split the CPU part from
// the disk part so a caller can move the latter to a background thread (the tensors are
// copied during encoding, so training may continue meanwhile).
//
// Errors: no exceptions escape (LibTorch's c10::Error is converted).

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton::trainer {

// Name -> tensor, in model order.
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// Counters and small state the training loop owns; stored verbatim.
struct TrainingProgress {
  int64_t step = 0;            // Completed optimizer steps, global (drives LrSchedule). >= 0.
  int64_t epoch = 0;           // Epoch of the next batch to train on.
  int64_t batch_in_epoch = 0;  // Batches of `epoch` already trained on (per rank).
  int64_t samples_seen = 0;    // Samples trained on, summed over ranks (global position).
  int64_t world_size = 0;      // World size when saved (lets a resized gang remap data).
  double scaler_scale = 1.0;   // GradScaler scale (fp16); 1 when unused.
  int64_t scaler_growth_tracker = 0;  // GradScaler clean steps since the last growth.
  std::string rng_extra;              // Opaque bytes restored as-is (e.g. an std::mt19937 dump).
};

// What a checkpoint captures. Save reads it; Restore writes into it.
struct TrainingState {
  TrainingProgress progress;
  // Handles to the LIVE parameters and buffers (e.g. Model::NamedParameters() followed
  // by NamedBuffers()); names must be unique. Restore copies into these tensors in place,
  // so the model and the optimizer keep pointing at them.
  NamedTensors tensors;
  // Not owned; may be null (no optimizer state saved/restored). Restore requires one of
  // the same type built over the same parameters in the same order (see optimizer.h).
  torch::optim::Optimizer* optimizer = nullptr;
};

struct CheckpointManagerOptions {
  std::string dir;               // Created on the first save if missing. Non-empty.
  int64_t checkpoint_every = 0;  // TrainerSpec.checkpoint_every; 0: ShouldSave is false.
  int32_t keep = 3;              // TrainerSpec.keep_checkpoints (0 -> default 3). >= 1.
};

struct RestoreOptions {
  // Set the CPU/CUDA generators from the checkpoint. (rng_extra is always returned.)
  bool restore_rng = true;
};

// Which checkpoint RestoreLatest loaded, and which it skipped.
struct RestoredCheckpoint {
  std::string path;
  int64_t step = 0;
  std::vector<std::string> skipped;  // Newer files rejected as corrupt, with the reason.
};

class CheckpointManager {
 public:
  // INVALID_ARGUMENT for an empty dir, checkpoint_every < 0 or keep < 0.
  static absl::StatusOr<CheckpointManager> Create(CheckpointManagerOptions options);

  // True when `step` (completed optimizer steps, > 0) is a multiple of checkpoint_every.
  bool ShouldSave(int64_t step) const;

  // EncodeCheckpoint + CommitCheckpoint. Returns the written path. Rank 0 only.
  absl::StatusOr<std::string> Save(const TrainingState& state) const;

  // The sealed file contents for `state`, with the calling process's RNG states.
  // INVALID_ARGUMENT on duplicate/empty tensor names or undefined tensors.
  absl::StatusOr<std::vector<char>> EncodeCheckpoint(const TrainingState& state) const;

  // Writes `sealed` (from EncodeCheckpoint) as the checkpoint of `step` atomically, then
  // prunes as described at the top. Returns the path.
  absl::StatusOr<std::string> CommitCheckpoint(int64_t step, const std::vector<char>& sealed) const;

  // Restores the newest valid checkpoint into `state` (progress, tensors in place,
  // optimizer state; RNG per `options`). The optimizer keeps its current hyperparameters
  // (lr, momentum, betas, ...): only its per-parameter state is loaded.
  //   NOT_FOUND: no valid checkpoint (none, or all corrupt): start from scratch.
  //   FAILED_PRECONDITION: a valid checkpoint does not fit `state` (missing/extra tensor
  //     names, shape or dtype change, other optimizer type or parameter count). `state`
  //     is unchanged.
  //   INVALID_ARGUMENT: duplicate names in state.tensors. `state` is unchanged.
  //   INTERNAL: loading failed part-way; `state` is unspecified, the caller must exit.
  absl::StatusOr<RestoredCheckpoint> RestoreLatest(TrainingState& state,
                                                   const RestoreOptions& options = {}) const;

  // Restores one specific checkpoint file (no fallback). DATA_LOSS if it is corrupt,
  // otherwise as RestoreLatest.
  absl::Status RestoreFrom(const std::string& path, TrainingState& state,
                           const RestoreOptions& options = {}) const;

  // Steps of the ckpt-*.pt files in the directory, ascending (valid or not).
  std::vector<int64_t> ListSteps() const;

  // <dir>/ckpt-<step>.pt.
  std::string PathForStep(int64_t step) const;

  const CheckpointManagerOptions& options() const { return options_; }

 private:
  explicit CheckpointManager(CheckpointManagerOptions options) : options_(std::move(options)) {}

  CheckpointManagerOptions options_;
};

// Final weights: a pickled Dict[str, Tensor] (name -> detached contiguous CPU tensor)
// written atomically to `path`, which Python's torch.load returns as a dict (the format
// of today's final.pt). INVALID_ARGUMENT on duplicate names.
absl::Status SaveWeights(const NamedTensors& tensors, const std::string& path);

}  // namespace baton::trainer
