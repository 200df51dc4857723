#include "worker/trainer/step/gradient_reducer.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include <exception>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace baton::trainer {
namespace {

// INVALID_ARGUMENT unless every parameter is a dense floating-point leaf requiring grad on
// the communicator's device.
absl::Status CheckParams(const std::vector<at::Tensor>& params, const Communicator& comm) {
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (!p.defined() || !p.requires_grad() || !p.is_leaf() || p.is_sparse() ||
        !p.is_floating_point()) {
      return absl::InvalidArgumentError(
          absl::StrCat("parameter ", i, " is not a dense floating-point leaf requiring grad"));
    }
    if (p.device() != comm.device()) {
      return absl::InvalidArgumentError(absl::StrCat("parameter ", i, " is on ", p.device().str(),
                                                     ", the communicator on ",
                                                     comm.device().str()));
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::vector<std::vector<size_t>> GradientBuckets(const std::vector<at::Tensor>& params,
                                                 double bucket_cap_mb) {
  const double cap_bytes = bucket_cap_mb * 1024.0 * 1024.0;
  std::vector<std::vector<size_t>> layout;
  double bytes = 0;
  for (size_t k = params.size(); k-- > 0;) {
    const at::Tensor& p = params[k];
    const double size = static_cast<double>(p.numel()) * p.element_size();
    const bool fits = !layout.empty() && !layout.back().empty() && bytes + size <= cap_bytes &&
                      params[layout.back().front()].scalar_type() == p.scalar_type();
    if (!fits) {
      layout.emplace_back();
      bytes = 0;
    }
    layout.back().push_back(k);
    bytes += size;
  }
  return layout;
}

struct GradientReducer::Core {
  struct Bucket {
    std::vector<size_t> params;    // Indices into Core::params.
    std::vector<int64_t> offsets;  // Slot start of each parameter in `buffer`.
    at::Tensor buffer;             // Flat, the parameters' dtype, on the device. Sharded:
                                   // allocated per step, `padded` elements.
    at::Tensor wire;               // What is all-reduced: `buffer`, or its 16-bit copy.
    at::Tensor output;             // Sharded: this rank's chunk of the sum.
    int64_t padded = 0;            // Sharded: world size * output's elements.
    int64_t used = 0;              // Elements the slots take (sharded: zero padding follows).
    size_t missing = 0;            // Gradients not yet copied in this step.
    std::unique_ptr<PendingCollective> pending;
    absl::Time started;  // When `pending` was started (while tracing).
  };

  Communicator* comm = nullptr;
  std::vector<at::Tensor> params;
  std::vector<size_t> bucket_of;             // Parameter -> bucket.
  std::vector<size_t> slot_of;               // Parameter -> position in its bucket.
  c10::ScalarType wire_dtype = c10::kFloat;  // Compressed type (unused for kNone).
  bool compress = false;
  bool emulated = false;  // Round to wire_dtype, sum in the bucket's dtype.
  bool sharded = false;   // ReduceScatterInto.
  bool as_view = false;   // GradientReducerOptions::gradient_as_bucket_view.

  mutable absl::Mutex mu;
  std::vector<Bucket> buckets ABSL_GUARDED_BY(mu);
  std::vector<bool> ready ABSL_GUARDED_BY(mu);  // Gradient copied in this step.
  size_t next_to_start ABSL_GUARDED_BY(mu) = 0;
  size_t next_to_wait ABSL_GUARDED_BY(mu) = 0;  // Sharded: buckets before it are done.
  bool armed ABSL_GUARDED_BY(mu) = false;       // Between BeginBackward(true) and Finish.
  absl::Status error ABSL_GUARDED_BY(mu);       // First failure inside a hook.
  std::vector<ReducerEvent> events ABSL_GUARDED_BY(mu);
  int started_in_backward ABSL_GUARDED_BY(mu) = 0;
  TraceRecorder* trace ABSL_GUARDED_BY(mu) = nullptr;  // SetTrace.
  const Clock* trace_clock ABSL_GUARDED_BY(mu) = nullptr;
  int64_t trace_step ABSL_GUARDED_BY(mu) = 0;

  // Hook body: parameter `index`'s gradient was just accumulated.
  void OnGradReady(size_t index) {
    absl::MutexLock lock(&mu);
    if (!armed || !error.ok() || ready[index]) return;
    events.push_back({ReducerEvent::Kind::kGradReady, static_cast<int>(index)});
    try {
      CopyIn(index);
      absl::Status s = StartReadyBuckets(/*in_backward=*/true);
      if (!s.ok()) error = s;
    } catch (const std::exception& e) {
      error = absl::InternalError(absl::StrCat("gradient hook: ", e.what()));
    }
  }

  // Whether the gradients are their buckets' slots (gradient_as_bucket_view at full width:
  // not sharded, not compressed; CopyIn makes them so). Then the all-reduce averages in the
  // buckets; else the sum is divided in FinishBackward, on its way back into the gradients.
  bool GradsAreSlots() const { return as_view && !sharded && !compress; }

  // Whether param.grad() is its slot of the bucket (see CopyIn).
  bool GradIsSlot(const at::Tensor& grad, const at::Tensor& slot) const {
    return grad.defined() && grad.data_ptr() == slot.data_ptr() && grad.sizes() == slot.sizes() &&
           grad.is_contiguous();
  }

  // Copies parameter `index`'s gradient (zeros if it has none) into its slot.
  // Full width (not sharded, not compressed), param.grad() then BECOMES the slot (a tensor
  // sharing the bucket's memory; detach()ed, so not an autograd view, which
  // Optimizer::zero_grad's detach_() refuses): zero_grad and the next backward accumulate
  // into the bucket in place, the copy is skipped from then on, and the all-reduce's sum is
  // averaged in place (DDP's gradient_as_bucket_view). Something that gives the parameter
  // another gradient tensor is copied once and re-pointed.
  void CopyIn(size_t index) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Bucket& bucket = buckets[bucket_of[index]];
    const at::Tensor& param = params[index];
    if (sharded && !bucket.buffer.defined()) {
      // Every slot is written below (a gradient or zeros): only the padding is zeroed here.
      bucket.buffer = at::empty({bucket.padded}, param.options().requires_grad(false));
      bucket.buffer.narrow(0, bucket.used, bucket.padded - bucket.used).zero_();
    }
    at::Tensor slot =
        bucket.buffer.narrow(0, bucket.offsets[slot_of[index]], param.numel()).view(param.sizes());
    const at::Tensor& grad = param.grad();
    const bool in_place = GradsAreSlots();
    if (!(in_place && GradIsSlot(grad, slot))) {
      if (grad.defined()) {
        slot.copy_(grad);
      } else {
        slot.zero_();
      }
      if (in_place) param.mutable_grad() = slot.detach();
    }
    // Sharded: the bucket holds it now; only this rank's chunk of the sum is kept.
    if (sharded) param.mutable_grad().reset();
    ready[index] = true;
    --bucket.missing;
  }

  // Starts every bucket from next_to_start on whose gradients are all in, in order.
  absl::Status StartReadyBuckets(bool in_backward) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    const int world = comm->world_size();
    while (next_to_start < buckets.size() && buckets[next_to_start].missing == 0) {
      Bucket& bucket = buckets[next_to_start];
      // Full-width sums are divided on the way back (one memory pass fewer); 16-bit ones
      // before the sum, as DDP does, so that they cannot overflow.
      if (compress) bucket.buffer.div_(world);
      if (compress) {
        bucket.wire.copy_(bucket.buffer);
        if (emulated) bucket.buffer.copy_(bucket.wire);  // Rounded; summed in full width.
      }
      // Before the call: a backend may do part or all of the work inside it.
      if (trace != nullptr) bucket.started = trace_clock->Now();
      // Gradients that are the bucket's slots (CopyIn) are averaged by the collective itself:
      // a backend may divide in its own last pass (one pass fewer after backward).
      absl::StatusOr<std::unique_ptr<PendingCollective>> pending =
          sharded ? comm->StartReduceScatterSum(bucket.buffer, bucket.output)
          : GradsAreSlots()
              ? comm->StartAllReduceMean(bucket.buffer)
              : comm->StartAllReduceSum(compress && !emulated ? bucket.wire : bucket.buffer);
      if (!pending.ok()) return pending.status();
      bucket.pending = *std::move(pending);
      events.push_back({ReducerEvent::Kind::kBucketStarted, static_cast<int>(next_to_start)});
      if (in_backward) ++started_in_backward;
      ++next_to_start;
      while (sharded && next_to_start - next_to_wait > kMaxScatterBucketsInFlight) {
        if (absl::Status s = WaitBucket(next_to_wait++); !s.ok()) return s;
      }
    }
    return absl::OkStatus();
  }

  // Waits for bucket b's collective (if started and not waited for) and traces it.
  // Sharded: then divides its output by the world size and frees its buffer.
  absl::Status WaitBucket(size_t b) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    Bucket& bucket = buckets[b];
    if (bucket.pending == nullptr) return absl::OkStatus();
    absl::Status s = bucket.pending->Wait();
    bucket.pending.reset();
    if (trace != nullptr) {
      TraceSpan span;
      span.name = absl::StrCat(sharded ? "reduce-scatter bucket " : "allreduce bucket ", b);
      span.category = "comm";
      span.start = bucket.started;
      span.duration = trace_clock->Now() - bucket.started;
      span.thread = kCommTraceThread;
      span.int_args["bytes"] =
          static_cast<int64_t>((compress && !emulated ? bucket.wire : bucket.buffer).nbytes());
      span.int_args["parameters"] = static_cast<int64_t>(bucket.params.size());
      span.int_args["step"] = trace_step;
      span.string_args["backend"] = comm->backend();
      if (!s.ok()) span.string_args["error"] = std::string(s.message());
      trace->Record(std::move(span));
    }
    if (sharded) {
      bucket.buffer = at::Tensor();
      if (s.ok()) at::div_out(bucket.output, bucket.output, MeanDivisor(comm->world_size()));
    }
    return s;
  }

  // Allocates the flat buffers of `layout`'s buckets (GradientBuckets) and the parameter ->
  // (bucket, slot) maps.
  void BuildBuckets(const std::vector<std::vector<size_t>>& layout)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (size_t b = 0; b < layout.size(); ++b) {
      Bucket bucket;
      bucket.params = layout[b];
      int64_t numel = 0;
      for (size_t s = 0; s < layout[b].size(); ++s) {
        const size_t index = layout[b][s];
        bucket_of[index] = b;
        slot_of[index] = s;
        bucket.offsets.push_back(numel);
        numel += params[index].numel();
      }
      const at::Tensor& first = params[layout[b].front()];
      bucket.used = numel;
      bucket.buffer = at::zeros({numel}, first.options().requires_grad(false));
      bucket.wire =
          compress ? at::zeros({numel}, bucket.buffer.options().dtype(wire_dtype)) : bucket.buffer;
      bucket.missing = bucket.params.size();
      buckets.push_back(std::move(bucket));
    }
    ready.assign(params.size(), false);
  }

  void Reset() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) {
    for (Bucket& bucket : buckets) {
      bucket.missing = bucket.params.size();
      bucket.pending.reset();
      if (sharded) bucket.buffer = at::Tensor();
    }
    std::fill(ready.begin(), ready.end(), false);
    next_to_start = 0;
    next_to_wait = 0;
  }
};

// Runs after a parameter's AccumulateGrad node wrote param.grad().
class GradientReducer::GradReadyHook final : public torch::autograd::FunctionPostHook {
 public:
  GradReadyHook(std::weak_ptr<Core> core, size_t index) : core_(std::move(core)), index_(index) {}

  torch::autograd::variable_list operator()(
      const torch::autograd::variable_list& outputs,
      const torch::autograd::variable_list& /*inputs*/) override {
    if (std::shared_ptr<Core> core = core_.lock()) core->OnGradReady(index_);
    return outputs;
  }

 private:
  std::weak_ptr<Core> core_;
  size_t index_;
};

absl::StatusOr<GradCompression> ParseGradCompression(absl::string_view name) {
  if (name.empty() || name == "none") return GradCompression::kNone;
  if (name == "bf16") return GradCompression::kBf16;
  if (name == "fp16") return GradCompression::kFp16;
  return absl::InvalidArgumentError(
      absl::StrCat("--grad_compression=", name, " is not one of none, bf16, fp16"));
}

GradientReducer::GradientReducer(std::shared_ptr<Core> core,
                                 std::vector<std::vector<size_t>> layout)
    : core_(std::move(core)), layout_(std::move(layout)) {}

GradientReducer::~GradientReducer() = default;

absl::StatusOr<std::unique_ptr<GradientReducer>> GradientReducer::Create(
    std::vector<at::Tensor> params, Communicator& comm, const GradientReducerOptions& options) {
  if (params.empty()) return absl::InvalidArgumentError("no parameters to reduce");
  if (!(options.bucket_cap_mb > 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--bucket_cap_mb=", options.bucket_cap_mb, " must be > 0"));
  }
  if (absl::Status s = CheckParams(params, comm); !s.ok()) return s;
  auto core = std::make_shared<Core>();
  core->comm = &comm;
  core->params = params;
  core->as_view = options.gradient_as_bucket_view;
  core->bucket_of.resize(params.size());
  core->slot_of.resize(params.size());
  if (options.compression != GradCompression::kNone) {
    core->compress = true;
    core->wire_dtype = options.compression == GradCompression::kBf16 ? c10::kBFloat16 : c10::kHalf;
    core->emulated = !comm.CanReduce(core->wire_dtype);
  }
  const std::vector<std::vector<size_t>> layout = GradientBuckets(params, options.bucket_cap_mb);

  std::unique_ptr<GradientReducer> reducer(new GradientReducer(core, layout));
  try {
    absl::MutexLock lock(&core->mu);
    core->BuildBuckets(layout);
    const std::weak_ptr<Core> weak = core;
    for (size_t i = 0; i < params.size(); ++i) {
      std::shared_ptr<torch::autograd::Node> node =
          torch::autograd::impl::grad_accumulator(params[i]);
      if (node == nullptr) {
        return absl::InvalidArgumentError(
            absl::StrCat("parameter ", i, " has no grad accumulator"));
      }
      node->add_post_hook(std::make_unique<GradReadyHook>(weak, i));
      reducer->accumulators_.push_back(std::move(node));
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("building gradient buckets: ", e.what()));
  }
  return reducer;
}

bool GradientReducer::compression_emulated() const { return core_->emulated; }

int64_t GradientReducer::bytes_per_sync() const {
  if (core_->comm->world_size() == 1) return 0;
  int64_t bytes = 0;
  for (const Core::Bucket& bucket : core_->buckets) {
    if (core_->sharded) {
      bytes += bucket.padded * static_cast<int64_t>(bucket.output.element_size());
      continue;
    }
    const at::Tensor& sent = core_->compress && !core_->emulated ? bucket.wire : bucket.buffer;
    bytes += static_cast<int64_t>(sent.nbytes());
  }
  return bytes;
}

bool GradientReducer::sharded() const { return core_->sharded; }

absl::Status GradientReducer::ReduceScatterInto(std::vector<at::Tensor> outputs) {
  Core& core = *core_;
  absl::MutexLock lock(&core.mu);
  const int world = core.comm->world_size();
  if (world == 1) {
    return absl::FailedPreconditionError("sharded gradients need more than one rank");
  }
  if (core.compress) {
    return absl::InvalidArgumentError(
        "sharded gradients (ZeRO stage 2) cannot be combined with gradient compression");
  }
  if (outputs.size() != core.buckets.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "sharded gradients: ", outputs.size(), " outputs for ", core.buckets.size(), " buckets"));
  }
  for (size_t b = 0; b < outputs.size(); ++b) {
    const Core::Bucket& bucket = core.buckets[b];
    const at::Tensor& out = outputs[b];
    const at::Tensor& first = core.params[bucket.params.front()];
    if (!out.defined() || out.scalar_type() != first.scalar_type() ||
        out.device() != core.comm->device() || !out.is_contiguous() ||
        out.numel() * world < bucket.used) {
      return absl::InvalidArgumentError(
          absl::StrCat("sharded gradients: output ", b, " must be a contiguous ",
                       std::string(first.dtype().name()), " tensor on ", core.comm->device().str(),
                       " of at least ", (bucket.used + world - 1) / world, " elements"));
    }
  }
  core.sharded = true;
  for (size_t b = 0; b < outputs.size(); ++b) {
    Core::Bucket& bucket = core.buckets[b];
    bucket.padded = outputs[b].numel() * world;
    bucket.output = std::move(outputs[b]);
    bucket.buffer = at::Tensor();
    bucket.wire = at::Tensor();
  }
  return absl::OkStatus();
}

void GradientReducer::BeginBackward(bool sync) {
  absl::MutexLock lock(&core_->mu);
  core_->Reset();
  core_->error = absl::OkStatus();
  core_->armed = sync && core_->comm->world_size() > 1;
  if (sync) {
    core_->events.clear();
    core_->started_in_backward = 0;
  }
}

absl::Status GradientReducer::FinishBackward() {
  Core& core = *core_;
  absl::MutexLock lock(&core.mu);
  if (core.comm->world_size() == 1) return absl::OkStatus();
  if (!core.armed) {
    return absl::FailedPreconditionError("FinishBackward without BeginBackward(sync=true)");
  }
  core.armed = false;
  core.events.push_back({ReducerEvent::Kind::kBackwardReturned, -1});
  absl::Status status = core.error;
  try {
    // Gradients that never arrived: parameters unused by the last micro-batch.
    for (size_t b = core.next_to_start; status.ok() && b < core.buckets.size(); ++b) {
      for (const size_t index : core.buckets[b].params) {
        if (!core.ready[index]) core.CopyIn(index);
      }
    }
    if (status.ok()) status = core.StartReadyBuckets(/*in_backward=*/false);
    // Wait for everything started, even after a failure, so no collective outlives
    // the buffers' use.
    for (size_t b = core.next_to_wait; b < core.buckets.size(); ++b) {
      absl::Status s = core.WaitBucket(b);
      if (status.ok()) status = s;
    }
    if (status.ok() && !core.sharded) {
      const at::Tensor divisor = MeanDivisor(core.compress ? 1 : core.comm->world_size());
      for (Core::Bucket& bucket : core.buckets) {
        if (core.compress && !core.emulated) bucket.buffer.copy_(bucket.wire);
        // The gradients are the bucket's slots (CopyIn), averaged by the all-reduce.
        if (core.GradsAreSlots()) continue;
        for (size_t s = 0; s < bucket.params.size(); ++s) {
          const at::Tensor& param = core.params[bucket.params[s]];
          at::Tensor sum =
              bucket.buffer.narrow(0, bucket.offsets[s], param.numel()).view(param.sizes());
          at::Tensor& grad = param.mutable_grad();
          if (grad.defined()) {
            at::div_out(grad, sum, divisor);  // The mean, in the copy back.
          } else {
            grad = at::div(sum, divisor);
          }
        }
      }
    }
  } catch (const std::exception& e) {
    if (status.ok()) status = absl::InternalError(absl::StrCat("averaging gradients: ", e.what()));
  }
  core.Reset();
  return status;
}

void GradientReducer::SetTrace(TraceRecorder* recorder, const Clock* clock, int64_t step) {
  absl::MutexLock lock(&core_->mu);
  core_->trace = clock == nullptr ? nullptr : recorder;
  core_->trace_clock = clock;
  core_->trace_step = step;
}

std::vector<ReducerEvent> GradientReducer::last_events() const {
  absl::MutexLock lock(&core_->mu);
  return core_->events;
}

int GradientReducer::started_during_backward() const {
  absl::MutexLock lock(&core_->mu);
  return core_->started_in_backward;
}

}  // namespace baton::trainer
