#pragma once

// ZeRO stages 1 and 2 (issue 14): each data-parallel rank keeps the optimizer state of
// only its shard of the parameters (shard_layout.h), updates that shard, and the updated
// shards are all-gathered straight into every rank's parameters.
//
// Segments and the flat buffer. The parameters are cut into segments (stage 2: the
// GradientReducer's buckets, GradientBuckets(), so a bucket's reduce-scatter yields this
// rank's gradient shard of that segment; otherwise one segment of all the parameters in
// model order). Each segment is laid out and sharded on its own by a ShardLayout: its
// parameters end to end in segment order, padded to world_size equal chunks. Create moves
// every parameter into one flat buffer on the device holding the segments one after the
// other: the parameters become views into it (Tensor::set_data: same tensors, so modules,
// optimizers and checkpoints keep working; they must not be replaced later, only written
// in place). This rank's shard is the concatenation of its chunk of every segment.
//
// The step, after backward:
//   1. the shard's values are copied out of the flat buffer (they may have been written
//      in place since: a restore, a broadcast);
//   2. its gradient is there already: stage 1, this rank's chunk of a flat gradient
//      buffer laid out as the parameters, whose views the parameters' gradients are (Create
//      sets them; zero_grad, AccumulateGrad, the reducer's averaging, unscaling and
//      clipping all write them in place; replacing one is FAILED_PRECONDITION at Step);
//      stage 2, the reducer reduce-scattered each bucket into GradientShards(), averaged,
//      and no param.grad() exists;
//   3. the SAME LibTorch optimizer (optim/optimizer.h, same options, the lr of the
//      reference optimizer's first group) steps over the shard alone;
//   4. one all-gather per segment, from the shard into the segment's part of the flat
//      buffer: the parameters are updated in place, no copy-back.
// SGD (momentum, weight decay, nesterov) and AdamW are elementwise, so every parameter
// element sees the same arithmetic as in the unsharded step given the same gradient (stage
// 1: the same bits, zero_optimizer_test checks it; stage 2: the gradient is a sum by a
// reduce-scatter instead of an all-reduce, see train_step_test for when that is the same
// sum). One difference: a parameter without a gradient gets a zero gradient here (and so
// weight decay and momentum), where LibTorch skips it; the GradientReducer gives every
// parameter a gradient, so the trainer never has one.
//
// Offload (offload_optimizer): on a CUDA device the shard, its gradient, the optimizer
// state and the update live in pinned host memory; the gradient shard is copied down
// before and the updated shard up after the optimizer step (1/N of the parameters each
// way). On CPU the state is in host memory already: offloading() is false and nothing
// changes (the trainer says so).
//
// The reference optimizer: the unsharded optimizer of the same options over all the
// parameters, as stage 0 builds it. It holds no state while training; the training loop
// uses it for what is not sharded: zero_grad, the lr (SetLearningRate), and as the
// checkpoint's optimizer (checkpoint/training_state.h). A checkpoint of stage 1 or 2 is
// therefore a checkpoint of stage 0, whatever the world size:
//   ExportState (collective, before rank 0 saves or the writer ranks snapshot): every state
//     tensor of the shards is all-gathered and the keeping ranks fill the reference
//     optimizer's per-parameter state with it. Memory while saving: on every rank one flat
//     buffer of the model's size per state tensor (one at a time), and on the keeping ranks
//     the full state (what stage 0 holds always) until ClearExportedState (a snapshot's
//     image holds it until its copy is written).
//   ImportState (local, after every rank restored the reference optimizer): each rank cuts
//     its shard from the full per-parameter state (so any world size, and any stage), then
//     clears the reference's state.
//
// Memory while training, beside the parameters (1x, now in the flat buffer): the shard's
// state (1/N of stage 0's) and a copy of the shard's values (1/N of the parameters). Stage
// 1 keeps the full gradient (in the flat gradient buffer) and the reducer's buckets, as
// stage 0; stage 2 keeps only the gradient shard (1/N; GradientReducer: at most two
// buckets in flight during backward). Offloading adds the gradient shard on the host.
//
// Not thread-safe: owned by the training loop's thread. Every rank must make the same
// collective calls (Step, ExportState) in the same order.

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/optim/optimizer.h"
#include "worker/trainer/zero/shard_layout.h"

namespace baton::trainer {

struct ZeroOptions {
  int stage = 1;  // 1: optimizer state sharded; 2: gradients too (GradientShards()).
  bool offload_optimizer = false;
  // Parameter indices per segment (see the header comment): a partition of all the
  // parameters, each segment's indices in its layout order. Empty: one segment, model
  // order. Stage 2 passes GradientBuckets(params, bucket_cap_mb).
  std::vector<std::vector<size_t>> segments;
};

class ZeroOptimizer {
 public:
  // Shards start on multiples of this many elements.
  static constexpr int64_t kAlign = 16;

  // `params`: the trainable parameters in model order (the same on every rank), dense,
  // contiguous, of one dtype, on comm.device(); they become views into the flat buffer
  // (and at stage 1 their gradients views into the flat gradient buffer, keeping any
  // gradient's values). Stage 1 takes one segment.
  // `reference`: the unsharded optimizer built by MakeOptimizer(params, options).
  // `reference` and `comm` must outlive the object. INVALID_ARGUMENT for bad options
  // (MakeOptimizer's), parameters, stage or segments.
  static absl::StatusOr<std::unique_ptr<ZeroOptimizer>> Create(std::vector<at::Tensor> params,
                                                               const OptimizerOptions& options,
                                                               torch::optim::Optimizer& reference,
                                                               Communicator& comm,
                                                               const ZeroOptions& zero = {});

  ZeroOptimizer(const ZeroOptimizer&) = delete;
  ZeroOptimizer& operator=(const ZeroOptimizer&) = delete;

  // The update of this rank's shard and the all-gathers of all shards into the parameters
  // (collective). Stage 1 reads the parameters' gradients (undefined: zeros), stage 2 the
  // gradient shards; both the reference's lr. UNAVAILABLE when an all-gather fails;
  // INTERNAL for LibTorch errors.
  absl::Status Step();

  // Fills the reference optimizer's state with the full, unsharded state on the ranks that
  // pass `keep` (collective: every rank calls it, the others only contribute their shard;
  // no-op, on every rank, before the first Step). A checkpoint keeps it on rank 0, an
  // in-memory snapshot on each snapshot writer. UNAVAILABLE when a collective fails;
  // INTERNAL for LibTorch errors.
  absl::Status ExportState(bool keep);
  // Drops what ExportState put into the reference optimizer.
  void ClearExportedState();
  // Replaces this rank's shard state with its cut of the reference optimizer's state (as
  // restored from a checkpoint; none: a fresh optimizer), then clears the reference's
  // state. FAILED_PRECONDITION if the reference holds state for only some parameters or
  // (AdamW) different step counts, or a state tensor has the wrong number of elements.
  absl::Status ImportState();

  int stage() const { return stage_; }
  // Whether the optimizer state lives in host memory apart from the device's parameters
  // (offload_optimizer on a CUDA device).
  bool offloading() const { return offloading_; }
  // Stage 2: the reduce-scatter outputs, one per segment in segment order (this rank's
  // chunk of each segment's gradient, on comm.device()): GradientReducer::ReduceScatterInto.
  std::vector<at::Tensor> GradientShards() const;
  // A leaf on comm.device() whose grad() is the concatenation of GradientShards(), for
  // unscaling and clipping the gradient shard at stage 2 before Step (its own values are
  // meaningless).
  const at::Tensor& gradient_shard_leaf() const { return grad_leaf_; }
  // Parameter indices per segment, as laid out (ZeroOptions::segments, or the default).
  std::vector<std::vector<size_t>> segments() const;

  // Elements of this rank's shard (padding included), of all the parameters, and of the
  // flat buffer (the parameters and every segment's padding).
  int64_t shard_numel() const { return shard_numel_; }
  int64_t total_numel() const { return total_numel_; }
  int64_t padded_numel() const { return flat_.numel(); }
  // Elements of optimizer state tensors this rank holds (momentum / moments of its shard).
  int64_t StateNumel() const;

 private:
  struct Segment {
    std::vector<size_t> params;      // Indices into params_, in layout order.
    ShardLayout layout;              // Over the segment's parameters.
    int64_t flat_begin = 0;          // Where the segment starts in flat_.
    int64_t shard_begin = 0;         // Where its chunk starts in this rank's shard.
    std::vector<ShardPiece> pieces;  // Of this rank's chunk; piece.param indexes `params`.
  };

  ZeroOptimizer(std::vector<at::Tensor> params, torch::optim::Optimizer& reference,
                Communicator& comm, int stage);
  // Lays the segments out, moves the parameters into the flat buffer and makes the shard's
  // buffers and optimizer; errors as Create.
  absl::Status Build(const OptimizerOptions& options, const ZeroOptions& zero);
  // Fills segments_, flat_offset_, shard_numel_ and total_numel_ from `zero.segments` and
  // returns the flat buffer's elements. INVALID_ARGUMENT for segments that are not a partition
  // of the parameters, parameters without elements, or stage 1 with several segments.
  absl::StatusOr<int64_t> LayOutSegments(const ZeroOptions& zero);
  // Moves the parameters into a new flat_ (at stage 1 their gradients into flat_grad_) and
  // allocates the shard's buffers (on the host when offloading_). INTERNAL for LibTorch's
  // errors.
  absl::Status AllocateBuffers(int64_t flat_numel);

  const std::vector<at::Tensor> params_;
  torch::optim::Optimizer& reference_;
  Communicator& comm_;
  const int stage_;
  bool offloading_ = false;
  std::vector<Segment> segments_;
  std::vector<int64_t> flat_offset_;  // Parameter -> where it starts in flat_.
  int64_t shard_numel_ = 0;
  int64_t total_numel_ = 0;
  at::Tensor flat_;       // The parameters' storage (comm.device()).
  at::Tensor shard_;      // Leaf, shard_numel_ elements; its grad is the shard's gradient.
  at::Tensor flat_grad_;  // Stage 1: the parameters' gradients (comm.device()).
  at::Tensor grad_dev_;   // The gradient shard on the device: stage 1 a view into
                          // flat_grad_, stage 2 the reduce-scatter outputs; shard_.grad()
                          // unless offloading.
  at::Tensor shard_dev_;  // The all-gather input (shard_ unless offloading).
  at::Tensor grad_leaf_;  // Shares grad_dev_'s storage; its grad is grad_dev_.
  std::unique_ptr<torch::optim::Optimizer> inner_;  // Over {shard_} only.
};

// Elements of all the state tensors `optimizer` holds (0 before its first step).
int64_t OptimizerStateNumel(const torch::optim::Optimizer& optimizer);

}  // namespace baton::trainer
