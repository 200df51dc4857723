#pragma once

// Data-parallel gradient averaging that overlaps communication with backward(), as
// PyTorch's DistributedDataParallel reducer does.
//
// Buckets. The trainable parameters are grouped, in REVERSE model order (the order
// backward() produces their gradients), into buckets of at most bucket_cap_mb MiB of
// gradient (a larger parameter gets a bucket of its own; a dtype change starts a new
// bucket). Each bucket owns a flat buffer on comm.device().
//
// Overlap. A post-hook on each parameter's AccumulateGrad node (the autograd node that
// writes param.grad(); the reducer keeps the nodes alive so the hooks survive between
// iterations) copies the fresh gradient into its bucket slot, the first time only with
// gradient_as_bucket_view: param.grad() then becomes the slot itself (a detached tensor on
// the bucket's memory, as DDP's gradient_as_bucket_view), so later backwards accumulate
// into the bucket in place and nothing is copied. When a bucket's last
// gradient arrives, its all-reduce is STARTED (async), while backward() goes on computing
// earlier layers' gradients. Buckets start strictly in bucket order (a ready bucket waits
// for the ones before it), so every rank issues the same collectives in the same order
// even when hooks fire in a different order.
//
// FinishBackward(), after backward(), starts the buckets whose gradients never arrived
// (parameters unused by the last micro-batch contribute their accumulated gradient, or
// zeros), waits for every bucket, and writes the averages back into param.grad().
// Averaging: full-width buckets are summed and divided by the world size, in place when
// the gradients are the bucket's views, else while being copied back into param.grad()
// (one memory pass either way); compressed ones are divided before the sum (below).
//
// Gradient accumulation. BeginBackward(sync=false) disarms the hooks: gradients just
// accumulate in param.grad() locally (DDP's no_sync). Only the backward of the last
// micro-batch (sync=true) communicates; param.grad() then holds the sum over the
// micro-batches, which the loop made a mean by dividing each micro-batch's loss.
//
// Compression ("bf16"/"fp16"): the pre-divided fp32 bucket is cast to the 16-bit type,
// summed in it, and cast back. Pre-dividing keeps partial sums within the largest |grad|,
// so the sum cannot overflow where the inputs did not; values below the 16-bit type's
// smallest subnormal flush to zero. When the backend cannot sum that type (Gloo in
// LibTorch 1.13 has no bfloat16) the values are rounded to it and summed in fp32:
// same rounding of the inputs, no bandwidth saved (compression_emulated() says so).
//
// Sharded gradients (ZeRO stage 2, ReduceScatterInto): each bucket is REDUCE-SCATTERED
// instead of all-reduced, into the caller's per-bucket output (this rank's chunk of the
// bucket), and the full gradients are dropped as soon as they are copied into their bucket:
// the hook resets param.grad() (sync backward only), a bucket's buffer is allocated when
// its first gradient arrives and freed once its collective completed, and at most
// kMaxScatterBucketsInFlight buckets are in flight (starting one more first waits for the
// oldest, on the autograd thread). After FinishBackward the outputs hold the means over
// ranks and no parameter has a gradient.
//
// Threading: hooks run on LibTorch's autograd thread(s) while the training thread is
// blocked in backward(); all state is guarded by one mutex. BeginBackward/FinishBackward
// are called by the training thread only.

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/time/clock.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/profile/trace.h"

namespace torch::autograd {
struct Node;
}  // namespace torch::autograd

namespace baton::trainer {

enum class GradCompression { kNone, kBf16, kFp16 };

// The buckets GradientReducer::Create makes of `params` (parameter indices per bucket, in
// start order: reverse model order, closing a bucket when bucket_cap_mb MiB would be
// exceeded or the dtype changes). ZeRO stage 2 cuts its shards per bucket from these.
std::vector<std::vector<size_t>> GradientBuckets(const std::vector<at::Tensor>& params,
                                                 double bucket_cap_mb);

// "none" (or ""), "bf16", "fp16". INVALID_ARGUMENT naming --grad_compression otherwise.
absl::StatusOr<GradCompression> ParseGradCompression(absl::string_view name);

// Defaults: TrainerSpec's (common/spec/trainer_spec_defaults.h).
struct GradientReducerOptions {
  // MiB of gradient per bucket; > 0.
  double bucket_cap_mb = trainer_spec::kBucketCapMb.default_value;
  // TrainerSpec.grad_compression's default, "none".
  GradCompression compression = GradCompression::kNone;
  // Full-width gradients (no compression, not sharded) become views of their buckets
  // (see the header comment); false keeps param.grad() tensors of their own (for an
  // optimizer that points them elsewhere itself, as ZeRO stage 1 does).
  bool gradient_as_bucket_view = true;
};

// One entry of a step's record (see GradientReducer::last_events()).
struct ReducerEvent {
  enum class Kind {
    kGradReady,        // index = parameter whose gradient arrived (hook fired).
    kBucketStarted,    // index = bucket whose all-reduce was started.
    kBackwardReturned  // FinishBackward was entered: backward() has returned.
  };
  Kind kind;
  int index;
  friend bool operator==(const ReducerEvent& a, const ReducerEvent& b) {
    return a.kind == b.kind && a.index == b.index;
  }
};

class GradientReducer {
 public:
  // `params`: the trainable parameters in model order (defined, requires_grad, dense, on
  // comm.device()). `comm` must outlive the reducer. INVALID_ARGUMENT for an empty list, a
  // parameter that does not qualify, or bucket_cap_mb <= 0.
  static absl::StatusOr<std::unique_ptr<GradientReducer>> Create(
      std::vector<at::Tensor> params, Communicator& comm, const GradientReducerOptions& options);

  // The hooks stay registered but do nothing once the reducer is gone.
  ~GradientReducer();
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  // Parameter indices (into `params`) of each bucket, in start order.
  const std::vector<std::vector<size_t>>& buckets() const { return layout_; }
  bool compression_emulated() const;
  // Bytes this rank all-reduces (sharded: reduce-scatters) per optimizer step: the buckets
  // as sent, 16-bit when compressed, padded when sharded; 0 for a world of one.
  int64_t bytes_per_sync() const;

  // Buckets reduce-scattered at once at most (sharded mode); bounds the gradient memory of
  // a step to this many buckets plus the outputs.
  static constexpr int kMaxScatterBucketsInFlight = 2;

  // Switches to sharded gradients (see the header comment): bucket b is reduce-scattered
  // into outputs[b], whose world_size-fold is the bucket's buffer: the bucket's gradients
  // end to end in bucket order, then zeros up to world_size * outputs[b].numel() elements.
  // outputs: one per bucket, dense, contiguous, of the bucket's dtype, on comm.device(),
  // not overlapping, each at least the bucket's elements / world_size; they are written
  // (and must not be touched) between BeginBackward(true) and FinishBackward. Call before
  // the first backward. INVALID_ARGUMENT for outputs that do not fit, or with compression;
  // FAILED_PRECONDITION for a world of one (nothing to shard).
  absl::Status ReduceScatterInto(std::vector<at::Tensor> outputs);
  bool sharded() const;

  // Call before each backward(): sync=true for the micro-batch that completes an optimizer
  // step (its backward starts the all-reduces), false for the ones before it (no
  // communication).
  void BeginBackward(bool sync);

  // After the sync backward(): see the header comment. On return every param.grad() holds
  // the mean over ranks (sharded: the outputs hold the means of their chunks, and no
  // param.grad() is defined). UNAVAILABLE if a collective failed; INTERNAL for a LibTorch error
  // in a hook; FAILED_PRECONDITION without a preceding BeginBackward(true). A world of one
  // communicates nothing.
  absl::Status FinishBackward();

  // The last sync step's hook and start order, ending with the buckets FinishBackward
  // started. Overlap happened when a kBucketStarted precedes kBackwardReturned.
  std::vector<ReducerEvent> last_events() const;
  // Buckets of the last sync step whose all-reduce started during backward().
  int started_during_backward() const;

  // Step profiling: while `recorder` is set, each bucket's all-reduce of a sync step is
  // recorded as a span on thread kCommTraceThread, from the call that starts it (read from
  // `clock`) to the return of its Wait() in FinishBackward (an upper bound of the
  // collective's time: a bucket started during backward() waits for backward to end),
  // with its bytes as sent, parameter count, `step` and the backend. Null stops recording.
  // `recorder` and `clock` must outlive their use. Training thread, between steps.
  void SetTrace(TraceRecorder* recorder, const Clock* clock, int64_t step);

 private:
  struct Core;
  class GradReadyHook;
  GradientReducer(std::shared_ptr<Core> core, std::vector<std::vector<size_t>> layout);

  std::shared_ptr<Core> core_;
  std::vector<std::vector<size_t>> layout_;
  // The parameters' AccumulateGrad nodes: autograd holds them only weakly between
  // iterations, and a re-created node would have lost its hook.
  std::vector<std::shared_ptr<torch::autograd::Node>> accumulators_;
};

}  // namespace baton::trainer
