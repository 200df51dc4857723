#pragma once

// torch::optim::SGD with the update fused into one pass over memory.
//
// LibTorch's SGD::step makes three passes over each parameter's memory with momentum
// (buf *= m; buf += g; p -= lr * buf) and a fourth, with a temporary, with weight decay.
// FusedSgd does the same arithmetic element by element in one pass (reads p, g, buf;
// writes buf, p): on a memory-bound step that is about 40% of the update's traffic.
//
// Same options, same state (SGDParamState::momentum_buffer, created on the first step as
// a copy of the gradient), so save/load and checkpoints are interchangeable with
// torch::optim::SGD. Parameters that are not dense contiguous float32 CPU tensors with a
// gradient of the same kind take LibTorch's update unchanged. Results equal
// torch::optim::SGD's up to rounding: LibTorch's vectorized kernels may fuse the final
// multiply-add (one rounding), the loop here rounds twice (a difference in the last bit
// of the parameter).
//
// Not thread-safe (as torch::optim::SGD); the loop runs on LibTorch's intra-op threads.

#include <torch/optim/sgd.h>

#include <vector>

namespace baton::trainer {

class FusedSgd final : public torch::optim::SGD {
 public:
  FusedSgd(std::vector<at::Tensor> params, torch::optim::SGDOptions options)
      : torch::optim::SGD(std::move(params), std::move(options)) {}

  // As SGD::step: evaluates `closure` (if any) first, with grad mode on, and returns its
  // loss.
  at::Tensor step(LossClosure closure = nullptr) override;
};

}  // namespace baton::trainer
