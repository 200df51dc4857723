#include "worker/trainer/models/recompute.h"

#include <ATen/Context.h>
#include <ATen/core/Generator.h>
#include <ATen/core/ivalue.h>
#include <c10/core/GradMode.h>
#include <c10/util/Optional.h>
#include <c10/util/intrusive_ptr.h>
#include <torch/csrc/autograd/autograd.h>
#include <torch/csrc/autograd/custom_function.h>

#include <mutex>
#include <utility>

#include "worker/trainer/device/compat.h"

namespace baton::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The thread-local autocast settings that change what a forward computes.
struct AutocastState {
  bool cpu_enabled = false;
  bool cuda_enabled = false;
  c10::ScalarType cpu_dtype = c10::kBFloat16;
  c10::ScalarType cuda_dtype = c10::kHalf;

  static AutocastState Current() {
    AutocastState s;
    s.cpu_enabled = compat::IsAutocastEnabled(c10::kCPU);
    s.cuda_enabled = compat::IsAutocastEnabled(c10::kCUDA);
    s.cpu_dtype = compat::GetAutocastDtype(c10::kCPU);
    s.cuda_dtype = compat::GetAutocastDtype(c10::kCUDA);
    return s;
  }
};

// Applies an AutocastState to this thread (entering an autocast region when it enables
// autocast) and restores the previous one on destruction.
class AutocastStateGuard {
 public:
  explicit AutocastStateGuard(const AutocastState& state)
      : previous_(AutocastState::Current()), entered_(state.cpu_enabled || state.cuda_enabled) {
    Apply(state);
    if (entered_) compat::EnterAutocast();
  }
  ~AutocastStateGuard() {
    if (entered_) compat::LeaveAutocast();
    Apply(previous_);
  }
  AutocastStateGuard(const AutocastStateGuard&) = delete;
  AutocastStateGuard& operator=(const AutocastStateGuard&) = delete;

 private:
  static void Apply(const AutocastState& s) {
    // The dtypes were read from this LibTorch, so setting them back is always supported.
    compat::SetAutocastDtype(c10::kCPU, s.cpu_dtype);
    compat::SetAutocastDtype(c10::kCUDA, s.cuda_dtype);
    compat::SetAutocastEnabled(c10::kCPU, s.cpu_enabled);
    compat::SetAutocastEnabled(c10::kCUDA, s.cuda_enabled);
  }

  const AutocastState previous_;
  const bool entered_;
};

at::Tensor GetRngState(at::Generator gen) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  return gen.get_state();
}

void SetRngState(at::Generator gen, const at::Tensor& state) {
  std::lock_guard<std::mutex> lock(gen.mutex());
  gen.set_state(state);
}

// The default generators a block may draw from: the CPU one, and the CUDA one of `cuda`.
struct RngState {
  at::Tensor cpu;
  c10::optional<c10::Device> cuda;
  at::Tensor cuda_state;

  static RngState Current(c10::optional<c10::Device> cuda) {
    RngState s;
    s.cpu = GetRngState(at::detail::getDefaultCPUGenerator());
    s.cuda = cuda;
    if (cuda) s.cuda_state = GetRngState(at::globalContext().defaultGenerator(*cuda));
    return s;
  }
  void Restore() const {
    SetRngState(at::detail::getDefaultCPUGenerator(), cpu);
    if (cuda) SetRngState(at::globalContext().defaultGenerator(*cuda), cuda_state);
  }
};

// Sets the generators to `saved` and puts their current states back on destruction.
class RngStateGuard {
 public:
  explicit RngStateGuard(const RngState& saved) : previous_(RngState::Current(saved.cuda)) {
    saved.Restore();
  }
  ~RngStateGuard() { previous_.Restore(); }
  RngStateGuard(const RngStateGuard&) = delete;
  RngStateGuard& operator=(const RngStateGuard&) = delete;

 private:
  const RngState previous_;
};

// Copies `buffers` and writes the copies back (in place) on destruction.
class BufferRestorer {
 public:
  explicit BufferRestorer(const std::vector<at::Tensor>& buffers) : buffers_(buffers) {
    c10::NoGradGuard no_grad;
    copies_.reserve(buffers.size());
    for (const at::Tensor& b : buffers) copies_.push_back(b.clone());
  }
  ~BufferRestorer() {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(copies_[i]);
  }
  BufferRestorer(const BufferRestorer&) = delete;
  BufferRestorer& operator=(const BufferRestorer&) = delete;

 private:
  const std::vector<at::Tensor>& buffers_;
  std::vector<at::Tensor> copies_;
};

// What backward needs besides the saved inputs. Held by the autograd context (as a capsule
// in saved_data) until the graph is freed.
struct RecomputeState : torch::CustomClassHolder {
  BlockForward forward;
  std::vector<at::Tensor> parameters;
  std::vector<at::Tensor> buffers;
  AutocastState autocast;
  RngState rng;
};

// The first CUDA device among the inputs, if any.
c10::optional<c10::Device> CudaDeviceOf(at::TensorList inputs) {
  for (const at::Tensor& x : inputs) {
    if (x.defined() && x.is_cuda()) return x.device();
  }
  return c10::nullopt;
}

// Gradient slots (backward's result): [state, inputs..., parameters...].
class RecomputeFunction : public torch::autograd::Function<RecomputeFunction> {
 public:
  static variable_list forward(AutogradContext* ctx, c10::intrusive_ptr<RecomputeState> state,
                               at::TensorList inputs, at::TensorList /*parameters*/) {
    // Runs with grad mode off (Function::apply): nothing inside the block is recorded.
    state->autocast = AutocastState::Current();
    state->rng = RngState::Current(CudaDeviceOf(inputs));
    ctx->save_for_backward(inputs.vec());
    at::Tensor out = state->forward(inputs.vec());
    ctx->saved_data["state"] = c10::IValue::make_capsule(std::move(state));
    return {out};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    const auto state =
        c10::static_intrusive_pointer_cast<RecomputeState>(ctx->saved_data.at("state").toCapsule());
    const variable_list saved = ctx->get_saved_variables();
    // Leaves of the recomputed graph: the inputs cut off from the outer graph.
    std::vector<at::Tensor> inputs;
    inputs.reserve(saved.size());
    for (const at::Tensor& x : saved) {
      at::Tensor leaf = x.detach();
      if (x.requires_grad()) leaf.requires_grad_(true);
      inputs.push_back(std::move(leaf));
    }
    // Restored when backward returns: the recomputed graph may have saved the buffers
    // (batch_norm's backward reads the running statistics), so not before it has run.
    const BufferRestorer buffers(state->buffers);
    at::Tensor out;
    {
      RngStateGuard rng(state->rng);
      AutocastStateGuard autocast(state->autocast);
      c10::AutoGradMode grad_mode(true);
      out = state->forward(inputs);
    }

    const size_t num_inputs = inputs.size();
    variable_list grads(1 + num_inputs + state->parameters.size());
    variable_list wrt;
    std::vector<size_t> slots;
    for (size_t i = 0; i < num_inputs; ++i) {
      if (!inputs[i].requires_grad()) continue;
      wrt.push_back(inputs[i]);
      slots.push_back(1 + i);
    }
    for (size_t j = 0; j < state->parameters.size(); ++j) {
      if (!state->parameters[j].requires_grad()) continue;
      wrt.push_back(state->parameters[j]);
      slots.push_back(1 + num_inputs + j);
    }
    if (wrt.empty() || !out.requires_grad()) return grads;
    const variable_list computed =
        torch::autograd::grad({out}, wrt, {grad_outputs.at(0)}, /*retain_graph=*/false,
                              /*create_graph=*/false, /*allow_unused=*/true);
    for (size_t k = 0; k < slots.size(); ++k) grads[slots[k]] = computed[k];
    return grads;
  }
};

}  // namespace

at::Tensor Recompute(torch::nn::Module& block, BlockForward forward,
                     const std::vector<at::Tensor>& inputs) {
  std::vector<at::Tensor> parameters = block.parameters();
  bool needs_grad = false;
  for (const at::Tensor& t : inputs) needs_grad |= t.defined() && t.requires_grad();
  for (const at::Tensor& p : parameters) needs_grad |= p.requires_grad();
  if (!c10::GradMode::is_enabled() || !needs_grad) return forward(inputs);

  auto state = c10::make_intrusive<RecomputeState>();
  state->forward = std::move(forward);
  state->parameters = parameters;
  state->buffers = block.buffers();
  const variable_list out = RecomputeFunction::apply(std::move(state), at::TensorList(inputs),
                                                     at::TensorList(parameters));
  return out.at(0);
}

}  // namespace baton::trainer
