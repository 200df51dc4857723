#pragma once

// ZeRO stage 1 (issue 14): each data-parallel rank keeps the optimizer state of only its
// shard of the parameters (shard_layout.h), updates that shard, and the updated shards are
// all-gathered into every rank's parameters.
//
// The step, after the gradients have been all-reduced (and unscaled/clipped) on every rank:
//   1. rank r copies its shard of the flat parameters and of their gradients into a leaf
//      tensor `shard` of layout.shard_numel() elements (padding: zeros);
//   2. it runs the SAME LibTorch optimizer (optim/optimizer.h, same options, the lr of the
//      reference optimizer's first group) over `shard` alone;
//   3. one all-gather of the shards (Communicator::AllGather) into a flat buffer of
//      layout.padded_numel() elements, copied back into the parameters.
// SGD (momentum, weight decay, nesterov) and AdamW are elementwise, so every parameter
// element sees the same arithmetic as in the unsharded step: the results are the same bits
// (zero_optimizer_test checks it). One difference: a parameter without a gradient gets a
// zero gradient here (and so weight decay and momentum), where LibTorch skips it; the
// GradientReducer gives every parameter a gradient, so the trainer never has one.
//
// The reference optimizer: the unsharded optimizer of the same options over all the
// parameters, as stage 0 builds it. It holds no state while training; the training loop
// uses it for what is not sharded: zero_grad, the lr (SetLearningRate), and as the
// checkpoint's optimizer (checkpoint/training_state.h). A checkpoint of stage 1 is therefore
// a checkpoint of stage 0, whatever the world size:
//   ExportState (collective, before rank 0 saves): every state tensor of the shards is
//     all-gathered and rank 0 fills the reference optimizer's per-parameter state with it.
//     Memory while saving: on every rank one flat buffer of the model's size per state
//     tensor (one at a time), and on rank 0 the full state (what stage 0 holds always)
//     until ClearExportedState.
//   ImportState (local, after every rank restored the reference optimizer): each rank cuts
//     its shard from the full per-parameter state (so any world size, and stage 0 <-> 1),
//     then clears the reference's state.
//
// Memory while training: the shard's state (1/N of stage 0's), the shard and its gradient
// (2/N of the parameters), and the all-gather buffer (the parameters' size).
//
// Not thread-safe: owned by the training loop's thread. Every rank must make the same
// collective calls (Step, ExportState) in the same order.

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/optim/optimizer.h"
#include "worker/trainer/zero/shard_layout.h"

namespace baton::trainer {

class ZeroOptimizer {
 public:
  // Shards start on multiples of this many elements.
  static constexpr int64_t kAlign = 16;

  // `params`: the trainable parameters in model order (the same on every rank), dense,
  // contiguous, of one dtype, on comm.device(). `reference`: the unsharded optimizer built
  // by MakeOptimizer(params, options). `reference` and `comm` must outlive the object.
  // INVALID_ARGUMENT for bad options (MakeOptimizer's) or parameters.
  static absl::StatusOr<std::unique_ptr<ZeroOptimizer>> Create(std::vector<at::Tensor> params,
                                                               const OptimizerOptions& options,
                                                               torch::optim::Optimizer& reference,
                                                               Communicator& comm);

  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  // The update of this rank's shard and the all-gather of all shards into the parameters
  // (collective). Reads the parameters' gradients (undefined: zeros) and the reference's
  // lr. UNAVAILABLE when the all-gather fails; INTERNAL for LibTorch errors.
  absl::Status Step();

  // Fills the reference optimizer's state on rank 0 with the full, unsharded state
  // (collective; no-op, on every rank, before the first Step). UNAVAILABLE when a
  // collective fails; INTERNAL for LibTorch errors.
  absl::Status ExportState();
  // Drops what ExportState put into the reference optimizer.
  void ClearExportedState();
  // Replaces this rank's shard state with its cut of the reference optimizer's state (as
  // restored from a checkpoint; none: a fresh optimizer), then clears the reference's
  // state. FAILED_PRECONDITION if the reference holds state for only some parameters or
  // (AdamW) different step counts, or a state tensor has the wrong number of elements.
  absl::Status ImportState();

  const ShardLayout& layout() const { return layout_; }
  // Elements of optimizer state tensors this rank holds (momentum / moments of its shard).
  int64_t StateNumel() const;

 private:
  ZeroOptimizer(std::vector<at::Tensor> params, torch::optim::Optimizer& reference,
                Communicator& comm, ShardLayout layout, at::Tensor shard, at::Tensor gathered,
                std::unique_ptr<torch::optim::Optimizer> inner);

  const std::vector<at::Tensor> params_;
  torch::optim::Optimizer& reference_;
  Communicator& comm_;
  const ShardLayout layout_;
  const std::vector<ShardPiece> pieces_;  // Of this rank's shard.
  at::Tensor shard_;     // Leaf, shard_numel elements; its grad is the shard's gradient.
  at::Tensor gathered_;  // padded_numel elements: the all-gather's output.
  std::unique_ptr<torch::optim::Optimizer> inner_;  // Over {shard_} only.
};

// Elements of all the state tensors `optimizer` holds (0 before its first step).
int64_t OptimizerStateNumel(const torch::optim::Optimizer& optimizer);

}  // namespace baton::trainer
