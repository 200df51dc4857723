#pragma once

// What a training-state checkpoint captures (checkpoint_manager.h): the loop's counters, the
// live parameters and buffers, and the optimizer. Plain structs; the training loop owns them.

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

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
  // the same type built over the same parameters in the same order (see optim/optimizer.h).
  torch::optim::Optimizer* optimizer = nullptr;
};

}  // namespace baton::trainer
