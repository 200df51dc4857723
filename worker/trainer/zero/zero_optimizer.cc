#include "worker/trainer/zero/zero_optimizer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <c10/util/string_utils.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

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
    torch::optim::Optimizer& reference, Communicator& comm) {
  if (params.empty()) return absl::InvalidArgumentError("zero: the model has no parameters");
  std::vector<int64_t> numels;
  for (const at::Tensor& p : params) {
    if (!p.defined() || p.scalar_type() != params[0].scalar_type() || p.device() != comm.device() ||
        !p.is_contiguous()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "zero: parameter ", numels.size(),
          " is not a contiguous tensor of the first one's dtype on the communicator's device"));
    }
    numels.push_back(p.numel());
  }
  ASSIGN_OR_RETURN(ShardLayout layout,
                   ShardLayout::Create(std::move(numels), comm.world_size(), kAlign));
  if (layout.total_numel() == 0) {
    return absl::InvalidArgumentError("zero: the model's parameters have no elements");
  }
  at::Tensor shard, gathered;
  std::unique_ptr<torch::optim::Optimizer> inner;
  try {
    const at::TensorOptions flat = params[0].options().requires_grad(false);
    shard = at::zeros({layout.shard_numel()}, flat).set_requires_grad(true);
    shard.mutable_grad() = at::zeros({layout.shard_numel()}, flat);
    gathered = at::empty({layout.padded_numel()}, flat);
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("zero: allocating the shard: ", e.what()));
  }
  ASSIGN_OR_RETURN(inner, MakeOptimizer({shard}, options));
  return std::unique_ptr<ZeroOptimizer>(new ZeroOptimizer(std::move(params), reference, comm,
                                                          std::move(layout), std::move(shard),
                                                          std::move(gathered), std::move(inner)));
}

ZeroOptimizer::ZeroOptimizer(std::vector<at::Tensor> params, torch::optim::Optimizer& reference,
                             Communicator& comm, ShardLayout layout, at::Tensor shard,
                             at::Tensor gathered, std::unique_ptr<torch::optim::Optimizer> inner)
    : params_(std::move(params)),
      reference_(reference),
      comm_(comm),
      layout_(std::move(layout)),
      pieces_(layout_.Pieces(comm.rank())),
      shard_(std::move(shard)),
      gathered_(std::move(gathered)),
      inner_(std::move(inner)) {}

absl::Status ZeroOptimizer::Step() {
  try {
    c10::NoGradGuard no_grad;
    const at::Tensor values = shard_.detach();
    at::Tensor grad = shard_.mutable_grad();
    grad.zero_();
    for (const ShardPiece& piece : pieces_) {
      const at::Tensor& p = params_[piece.param];
      values.narrow(0, piece.shard_offset, piece.length)
          .copy_(p.detach().view(-1).narrow(0, piece.param_offset, piece.length));
      if (p.grad().defined()) {
        grad.narrow(0, piece.shard_offset, piece.length)
            .copy_(p.grad().reshape(-1).narrow(0, piece.param_offset, piece.length));
      }
    }
    SetLearningRate(*inner_, GetLearningRate(reference_));
    inner_->step();
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("zero: shard update: ", e.what()));
  }
  RETURN_IF_ERROR(comm_.AllGather(shard_.detach(), gathered_));
  try {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < params_.size(); ++i) {
      params_[i].detach().view(-1).copy_(
          gathered_.narrow(0, layout_.param_offset(static_cast<int>(i)), layout_.numels()[i]));
    }
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat("zero: parameter copy-back: ", e.what()));
  }
  return absl::OkStatus();
}

absl::Status ZeroOptimizer::ExportState() {
  const auto it = inner_->state().find(StateKey(shard_));
  // Every rank stepped as often as the others: all have state, or none.
  if (it == inner_->state().end()) return absl::OkStatus();
  const bool adamw = dynamic_cast<const AdamWParamState*>(it->second.get()) != nullptr;
  const std::vector<at::Tensor> shard_state = StateTensors(*it->second);
  const int64_t step = StateStep(*it->second);
  const bool keep = comm_.rank() == 0;
  std::vector<std::vector<at::Tensor>> per_param(params_.size());
  for (const at::Tensor& tensor : shard_state) {
    at::Tensor full;
    try {
      full = at::empty({layout_.padded_numel()}, tensor.options());
    } catch (const std::exception& e) {
      return absl::InternalError(absl::StrCat("zero: export buffer: ", e.what()));
    }
    RETURN_IF_ERROR(comm_.AllGather(tensor, full));
    if (!keep) continue;
    try {
      for (size_t i = 0; i < params_.size(); ++i) {
        per_param[i].push_back(
            full.narrow(0, layout_.param_offset(static_cast<int>(i)), layout_.numels()[i])
                .view(params_[i].sizes())
                .clone());
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
      at::Tensor shard = at::zeros({layout_.shard_numel()}, shard_.options().requires_grad(false));
      for (const ShardPiece& piece : pieces_) {
        const OptimizerParamState& state = *states[piece.param];
        const std::vector<at::Tensor> tensors = StateTensors(state);
        if (StateStep(state) != step || tensors.size() != fields || !tensors[f].defined() ||
            tensors[f].numel() != layout_.numels()[piece.param]) {
          return absl::FailedPreconditionError(
              absl::StrCat("zero: the restored optimizer state of parameter ", piece.param,
                           " does not match the first parameter's step or the parameter's size"));
        }
        shard.narrow(0, piece.shard_offset, piece.length)
            .copy_(tensors[f].reshape(-1).narrow(0, piece.param_offset, piece.length));
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
