#pragma once

// The contents of a step checkpoint and of the final weights, and how a checkpoint is
// applied to the live training state. Internal to the checkpoint package: the manager
// (checkpoint_manager.h) decides which file, this code what is in it.
//
// A step checkpoint is a sealed archive (checkpoint_file.h) holding a pickled dict that
// Python's torch.load(path) reads:
//
//   "format": "baton-checkpoint-v2"
//   "step", "epoch", "batch_in_epoch", "samples_seen", "world_size",
//   "scaler_growth_tracker": int          "scaler_scale": float
//   "model": {name: Tensor}               parameters and buffers (detached, contiguous, CPU)
//   "optimizer_type": "sgd" | "adamw" | "none" | "other"
//   "optimizer_params": int               parameters the optimizer holds
//   "optimizer_state": [{str: Tensor}]    per parameter of the optimizer (param-group
//                                         order), its state: SGD "momentum_buffer"; AdamW
//                                         "step" (0-d int64), "exp_avg", "exp_avg_sq",
//                                         ["max_exp_avg_sq"]; {} before its first step
//   "rng_cpu": uint8 Tensor               the default CPU generator state
//   "rng_cuda": [uint8 Tensor]            default CUDA generator states, one per device
//   "rng_extra": uint8 Tensor             the caller's opaque bytes (e.g. std::mt19937)
//
// Decoding runs LibTorch's unpickler without a TorchScript type resolver, so a file that
// names a class is refused: whoever can write the checkpoint directory (the job's own
// ranks) cannot make the trainer run code. Format v1 (an earlier Baton) kept the optimizer
// state as a torch::serialize archive, whose loader is TorchScript's importer: it is
// refused with FAILED_PRECONDITION, never loaded.
//
// The final weights are a pickled Dict[str, Tensor] (name -> detached contiguous CPU
// tensor), unsealed, which torch.load returns as a dict.
//
// Errors: no exceptions escape (LibTorch's c10::Error is converted). Thread-compatible;
// encoding and applying read or set the process's default generators.

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/checkpoint/training_state.h"

namespace baton::trainer {

// A checkpoint file decoded and checked for internal consistency (not yet against the
// live state).
struct DecodedCheckpoint {
  TrainingProgress progress;
  absl::flat_hash_map<std::string, at::Tensor> model;
  // The names of `model` in the order the bytes held them (the model's order when Baton
  // wrote them).
  std::vector<std::string> model_order;
  std::string optimizer_type;
  int64_t optimizer_params = 0;
  // Per optimizer parameter: its state (see "optimizer_state" above), not yet checked
  // against the live optimizer.
  std::vector<absl::flat_hash_map<std::string, at::Tensor>> optimizer_state;
  at::Tensor rng_cpu;
  std::vector<at::Tensor> rng_cuda;
};

// The sealed file contents for `state`, with the calling process's RNG states.
// INVALID_ARGUMENT on a negative step, duplicate/empty tensor names, undefined tensors or
// an optimizer other than SGD and AdamW;
// INTERNAL when serialising or sealing fails.
absl::StatusOr<std::vector<char>> EncodeTrainingState(const TrainingState& state);

// The sealed file contents of a decoded checkpoint (e.g. an in-memory snapshot's,
// snapshot/snapshot_codec.h): what EncodeTrainingState wrote for the state it was taken
// from, its RNG states included (not the calling process's), which decodes to `decoded`
// again. Model tensors in model_order; a parameter's optimizer state by name.
// INVALID_ARGUMENT as EncodeTrainingState, and when model_order does not name each model
// tensor once; INTERNAL when serialising or sealing fails.
absl::StatusOr<std::vector<char>> EncodeDecodedCheckpoint(const DecodedCheckpoint& decoded);

// Reads, verifies (the trailer) and decodes one checkpoint file. NOT_FOUND if it does not
// exist; DATA_LOSS if it is corrupt or not a checkpoint; FAILED_PRECONDITION for format
// v1 (above); INTERNAL on read errors.
absl::StatusOr<DecodedCheckpoint> ReadCheckpointFile(const std::string& path);

// Verifies (the trailer) and decodes a checkpoint file's bytes: DATA_LOSS if they are
// corrupt or not a checkpoint, FAILED_PRECONDITION for format v1.
absl::StatusOr<DecodedCheckpoint> DecodeCheckpoint(const std::vector<char>& bytes);

// Copies `decoded` into `state`: progress, tensors in place, optimizer state (keeping the
// optimizer's live hyperparameters) and, if `restore_rng`, the CPU/CUDA generators.
//   FAILED_PRECONDITION: `decoded` does not fit `state` (tensor names, shapes, dtypes,
//     optimizer type, parameter count, or optimizer state that optimizer could not have).
//     `state` is unchanged.
//   INVALID_ARGUMENT: duplicate names in state.tensors. `state` is unchanged.
//   INTERNAL: loading failed part-way; `state` is unspecified.
absl::Status ApplyCheckpoint(const DecodedCheckpoint& decoded, TrainingState& state,
                             bool restore_rng);

// The parts of a training state that EncodeTrainingState reads, for another encoding of the
// same state (the in-memory snapshots, snapshot/snapshot_codec.h) that must decode to the
// same DecodedCheckpoint.
//
// "sgd", "adamw", "none" (null) or "other" (which no checkpoint holds).
std::string OptimizerType(const torch::optim::Optimizer* optimizer);
// Parameters over the optimizer's groups.
int64_t OptimizerParamCount(const torch::optim::Optimizer& optimizer);
// Per parameter of `optimizer` (param-group order), its state as "optimizer_state" above
// names it: the LIVE tensors (detached, not copied), except AdamW's "step", a new 0-d int64
// tensor. Empty for a parameter without state and for an optimizer of type "other".
std::vector<std::vector<std::pair<std::string, at::Tensor>>> LiveOptimizerState(
    const torch::optim::Optimizer& optimizer);
// The calling process's default CPU generator state; its CUDA generators' (one per device,
// none without CUDA).
at::Tensor CpuRngState();
std::vector<at::Tensor> CudaRngStates();
// Sets the generators to states those returned (as a restore does): CUDA ones only where
// this process has CUDA, the first min(devices, cuda.size()), with a warning on a mismatch.
void SetRngStates(const at::Tensor& cpu, const std::vector<at::Tensor>& cuda);

// The pickled final weights of `tensors` (`path` only names the file in errors).
// INVALID_ARGUMENT on duplicate names; INTERNAL when serialising fails.
absl::StatusOr<std::vector<char>> EncodeWeights(const NamedTensors& tensors,
                                                const std::string& path);

}  // namespace baton::trainer
