#include "worker/trainer/zero/zero_optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/string_utils.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <exception>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace baton::trainer {
namespace {

using torch::optim::AdamWParamState;
using torch::optim::OptimizerParamState;
using torch::optim::SGDParamState;

// How LibTorch's optimizers key their per-parameter state.
std::string StateKey(const at::Tensor& param) {
  return c10::guts::to_string(param.unsafeGetTensorImpl());
}

// The tensors of one parameter's state, in a fixed order per optimizer type.
std::vector<at::Tensor> StateTensors(const OptimizerParamState& state) {
  if (const auto* sgd = dynamic_cast<const SGDParamState*>(&state)) {
    return {sgd->momentum_buffer()};
  }
  if (const auto* adamw = dynamic_cast<const AdamWParamState*>(&state)) {
    return {adamw->exp_avg(), adamw->exp_avg_sq()};
  }
  return {};
}

// AdamW's step count (0 for SGD).
int64_t StateStep(const OptimizerParamState& state) {
  const auto* adamw = dynamic_cast<const AdamWParamState*>(&state);
  return adamw != nullptr ? adamw->step() : 0;
}

// The state of optimizer type `adamw` from StateTensors' tensors and StateStep's step.
std::unique_ptr<OptimizerParamState> MakeState(bool adamw, std::vector<at::Tensor> tensors,
                                               int64_t step) {
  if (adamw) {
    auto state = std::make_unique<AdamWParamState>();
    state->step(step);
    state->exp_avg(std::move(tensors[0]));
    state->exp_avg_sq(std::move(tensors[1]));
    return state;
  }
  auto state = std::make_unique<SGDParamState>();
  state->momentum_buffer(std::move(tensors[0]));
  return state;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ZeroOptimizer>> ZeroOptimizer::Create(
    std::vector<at::Tensor> params, const OptimizerOptions& options,
    torch::optim::Optimizer& reference, Communicator& comm, const ZeroOptions& zero) {
  if (params.empty()) return absl::InvalidArgumentError("zero: the model has no parameters");
  if (zero.stage != 1 && zero.stage != 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("zero: stage ", zero.stage, " is not a sharded stage (1 or 2)"));
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const at::Tensor& p = params[i];
    if (!p.defined() || p.scalar_type() != params[0].scalar_type() || p.device() != comm.device() ||
        !p.is_contiguous()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zero: parameter ", i,
          " is not a contiguous tensor of the first one's dtype on the communicator's device"));
    }
  }
  std::unique_ptr<ZeroOptimizer> optimizer(
      new ZeroOptimizer(std::move(params), reference, comm, zero.stage));
  RETURN_IF_ERROR(optimizer->Build(options, zero));
  return optimizer;
}

ZeroOptimizer::ZeroOptimizer(std::vector<at::Tensor> params, torch::optim::Optimizer& reference,
                             Communicator& comm, int stage)
    : params_(std::move(params)), reference_(reference), comm_(comm), stage_(stage) {}

absl::Status ZeroOptimizer::Build(const OptimizerOptions& options, const ZeroOptions& zero) {
  ASSIGN_OR_RETURN(const int64_t flat_numel, LayOutSegments(zero));
  offloading_ = zero.offload_optimizer && comm_.device().is_cuda();
  RETURN_IF_ERROR(AllocateBuffers(flat_numel));
  ASSIGN_OR_RETURN(inner_, MakeOptimizer({shard_}, options));
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ZeroOptimizer::LayOutSegments(const ZeroOptions& zero) {
  std::vector<std::vector<size_t>> segments = zero.segments;
  if (segments.empty()) {
    segments.emplace_back();
    for (size_t i = 0; i < params_.size(); ++i) segments.back().push_back(i);
  }
  std::vector<bool> seen(params_.size(), false);
  flat_offset_.assign(params_.size(), 0);
  int64_t flat_numel = 0;
  for (std::vector<size_t>& indices : segments) {
    std::vector<int64_t> numels;
    for (const size_t i : indices) {
      if (i >= params_.size() || seen[i]) {
        return absl::InvalidArgumentError(
            absl::StrCat("zero: the segments are not a partition of the ", params_.size(),
                         " parameters (index ", i, " is out of range or repeated)"));
      }
      seen[i] = true;
      numels.push_back(params_[i].numel());
    }
    ASSIGN_OR_RETURN(ShardLayout layout,
                     ShardLayout::Create(std::move(numels), comm_.world_size(), kAlign));
    Segment segment{std::move(indices), std::move(layout), flat_numel, shard_numel_, {}};
    segment.pieces = segment.layout.Pieces(comm_.rank());
    for (size_t k = 0; k < segment.params.size(); ++k) {
      flat_offset_[segment.params[k]] = flat_numel + segment.layout.param_offset(k);
    }
    flat_numel += segment.layout.padded_numel();
    shard_numel_ += segment.layout.shard_numel();
    total_numel_ += segment.layout.total_numel();
    segments_.push_back(std::move(segment));
  }
  if (std::find(seen.begin(), seen.end(), false) != seen.end()) {
    return absl::InvalidArgumentError("zero: the segments leave parameters out");
  }
  if (total_numel_ == 0) {
    return absl::InvalidArgumentError("zero: the model's parameters have no elements");
  }
  if (stage_ == 1 && segments_.size() != 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "zero: stage 1 lays the parameters out as one segment, not ", segments_.size()));
  }
  return flat_numel;
}

absl::Status ZeroOptimizer::AllocateBuffers(int64_t flat_numel) {
  try {
    c10::NoGradGuard no_grad;
    const at::TensorOptions device = params_[0].options().requires_grad(false);
    const at::TensorOptions host =
        offloading_ ? device.device(c10::kCPU).pinned_memory(true) : device;
    flat_ = at::zeros({flat_numel}, device);
    for (size_t i = 0; i < params_.size(); ++i) {
      at::Tensor slot =
          flat_.narrow(0, flat_offset_[i], params_[i].numel()).view(params_[i].sizes());
      slot.copy_(params_[i].detach());
      params_[i].set_data(slot);
    }
    // The gradient shard on the device: stage 1, this rank's chunk of the flat gradient
    // buffer whose views the parameters' gradients are; stage 2, the reduce-scatters'
    // outputs.
    if (stage_ == 1) {
      flat_grad_ = at::zeros({flat_numel}, device);
      for (size_t i = 0; i < params_.size(); ++i) {
        // detach(): not an autograd view, so that zero_grad's detach_() accepts it.
        at::Tensor slot = flat_grad_.narrow(0, flat_offset_[i], params_[i].numel())
                              .view(params_[i].sizes())
                              .detach();
        if (params_[i].grad().defined()) slot.copy_(params_[i].grad());
        params_[i].mutable_grad() = slot;
      }
      grad_dev_ = flat_grad_.narrow(0, segments_[0].layout.shard_begin(comm_.rank()), shard_numel_);
    } else {
      grad_dev_ = at::zeros({shard_numel_}, device);
    }
    shard_ = at::zeros({shard_numel_}, host).set_requires_grad(true);
    shard_.mutable_grad() = offloading_ ? at::zeros({shard_numel_}, host) : grad_dev_;
    shard_dev_ = offloading_ ? at::zeros({shard_numel_}, device) : shard_.detach();
    grad_leaf_ = grad_dev_.detach().set_requires_grad(true);
    grad_leaf_.mutable_grad() = grad_dev_;
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("zero: allocating the shard: ", e.what()));
  }
  return absl::OkStatus();
}

std::vector<at::Tensor> ZeroOptimizer::GradientShards() const {
  std::vector<at::Tensor> shards;
  for (const Segment& segment : segments_) {
    shards.push_back(grad_dev_.narrow(0, segment.shard_begin, segment.layout.shard_numel()));
  }
  return shards;
}

std::vector<std::vector<size_t>> ZeroOptimizer::segments() const {
  std::vector<std::vector<size_t>> segments;
  for (const Segment& segment : segments_) segments.push_back(segment.params);
  return segments;
}

absl::Status ZeroOptimizer::Step() {
  try {
    c10::NoGradGuard no_grad;
    const at::Tensor values = shard_.detach();
    at::Tensor grad = shard_.mutable_grad();
    const int rank = comm_.rank();
    for (const Segment& segment : segments_) {
      const int64_t chunk = segment.layout.shard_numel();
      values.narrow(0, segment.shard_begin, chunk)
          .copy_(flat_.narrow(0, segment.flat_begin + segment.layout.shard_begin(rank), chunk));
    }
    if (stage_ == 1) {
      // The parameters' gradients must still be views into flat_grad_.
      for (size_t i = 0; i < params_.size(); ++i) {
        const at::Tensor& g = params_[i].grad();
        const char* slot = static_cast<const char*>(flat_grad_.data_ptr()) +
                           flat_offset_[i] * flat_grad_.element_size();
        if (!g.defined() || g.data_ptr() != slot) {
          return absl::FailedPreconditionError(absl::StrCat(
              "zero: the gradient of parameter ", i,
              " was replaced or reset; at stage 1 gradients must be written in place"));
        }
      }
    }
    if (offloading_) grad.copy_(grad_dev_);
    SetLearningRate(*inner_, GetLearningRate(reference_));
    inner_->step();
    if (offloading_) shard_dev_.copy_(values);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("zero: shard update: ", e.what()));
  }
  // Every segment's all-gather is started before any is waited for.
  std::vector<std::unique_ptr<PendingCollective>> pending;
  absl::Status status;
  for (const Segment& segment : segments_) {
    absl::StatusOr<std::unique_ptr<PendingCollective>> started = comm_.StartAllGather(
        shard_dev_.narrow(0, segment.shard_begin, segment.layout.shard_numel()),
        flat_.narrow(0, segment.flat_begin, segment.layout.padded_numel()));
    if (!started.ok()) {
      status = started.status();
      break;
    }
    pending.push_back(*std::move(started));
  }
  for (const std::unique_ptr<PendingCollective>& p : pending) {
    absl::Status s = p->Wait();
    if (status.ok()) status = s;
  }
  return status;
}

absl::Status ZeroOptimizer::ExportState(bool keep) {
  const auto it = inner_->state().find(StateKey(shard_));
  // Every rank stepped as often as the others: all have state, or none.
  if (it == inner_->state().end()) return absl::OkStatus();
  const bool adamw = dynamic_cast<const AdamWParamState*>(it->second.get()) != nullptr;
  const std::vector<at::Tensor> shard_state = StateTensors(*it->second);
  const int64_t step = StateStep(*it->second);
  std::vector<std::vector<at::Tensor>> per_param(params_.size());
  for (const at::Tensor& tensor : shard_state) {
    // Laid out as flat_: each parameter's state where the parameter is.
    at::Tensor full, local;
    try {
      full = at::empty({flat_.numel()}, flat_.options());
      local = tensor.to(comm_.device());
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("zero: export buffer: ", e.what()));
    }
    for (const Segment& segment : segments_) {
      RETURN_IF_ERROR(
          comm_.AllGather(local.narrow(0, segment.shard_begin, segment.layout.shard_numel()),
                          full.narrow(0, segment.flat_begin, segment.layout.padded_numel())));
    }
    if (!keep) continue;
    try {
      for (size_t i = 0; i < params_.size(); ++i) {
        per_param[i].push_back(
            full.narrow(0, flat_offset_[i], params_[i].numel()).view(params_[i].sizes()).clone());
      }
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("zero: export: ", e.what()));
    }
  }
  if (keep) {
    for (size_t i = 0; i < params_.size(); ++i) {
      reference_.state()[StateKey(params_[i])] = MakeState(adamw, std::move(per_param[i]), step);
    }
  }
  return absl::OkStatus();
}

void ZeroOptimizer::ClearExportedState() { reference_.state().clear(); }

absl::Status ZeroOptimizer::ImportState() {
  auto& saved = reference_.state();
  std::vector<const OptimizerParamState*> states;
  for (const at::Tensor& p : params_) {
    const auto it = saved.find(StateKey(p));
    if (it != saved.end()) states.push_back(it->second.get());
  }
  if (states.empty()) {
    inner_->state().clear();
    return absl::OkStatus();
  }
  if (states.size() != params_.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("zero: the restored optimizer has state for ", states.size(), " of ",
                     params_.size(), " parameters; a sharded optimizer needs all or none"));
  }
  const bool adamw = dynamic_cast<const AdamWParamState*>(states[0]) != nullptr;
  const int64_t step = StateStep(*states[0]);
  const size_t fields = StateTensors(*states[0]).size();
  std::vector<at::Tensor> shard_state;
  try {
    for (size_t f = 0; f < fields; ++f) {
      at::Tensor shard = at::zeros({shard_numel_}, shard_.options().requires_grad(false));
      for (const Segment& segment : segments_) {
        for (const ShardPiece& piece : segment.pieces) {
          const size_t param = segment.params[piece.param];
          const OptimizerParamState& state = *states[param];
          const std::vector<at::Tensor> tensors = StateTensors(state);
          if (StateStep(state) != step || tensors.size() != fields || !tensors[f].defined() ||
              tensors[f].numel() != params_[param].numel()) {
            return absl::FailedPreconditionError(
                absl::StrCat("zero: the restored optimizer state of parameter ", param,
                             " does not match the first parameter's step or the parameter's size"));
          }
          shard.narrow(0, segment.shard_begin + piece.shard_offset, piece.length)
              .copy_(tensors[f].reshape(-1).narrow(0, piece.param_offset, piece.length));
        }
      }
      shard_state.push_back(std::move(shard));
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("zero: import: ", e.what()));
  }
  inner_->state()[StateKey(shard_)] = MakeState(adamw, std::move(shard_state), step);
  saved.clear();
  return absl::OkStatus();
}

int64_t ZeroOptimizer::StateNumel() const { return OptimizerStateNumel(*inner_); }

int64_t OptimizerStateNumel(const torch::optim::Optimizer& optimizer) {
  int64_t n = 0;
  for (const auto& [key, state] : optimizer.state()) {
    for (const at::Tensor& t : StateTensors(*state)) {
      if (t.defined()) n += t.numel();
    }
  }
  return n;
}

}  // namespace baton::trainer
