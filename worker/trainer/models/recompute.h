#pragma once

// Activation checkpointing (TrainerSpec.activation_checkpointing "blocks"): run a block of a
// model so that backward recomputes the block's intermediate activations instead of keeping
// them from the forward pass. LibTorch has no torch.utils.checkpoint; this is a
// torch::autograd::Function in C++.
//
//   x = Recompute(*block, [&](const std::vector<at::Tensor>& in) {
//     return block->forward(in[0]);
//   }, {x});
//
// Forward runs `forward` once with gradients disabled and keeps only the input tensors (plus
// the RNG and autocast state). When the graph reaches the block in backward, it runs
// `forward` again with gradients enabled on detached copies of the inputs, under the saved
// RNG and autocast state, and differentiates that recomputed graph for the gradients of
// the inputs and of the block's parameters. The recomputed graph is freed before backward
// moves on.
//
// Contract:
//   - `forward` computes one tensor from `inputs`, `block`'s parameters and buffers, the
//     default generators (CPU, and CUDA for CUDA inputs) and values it captures (non-tensor
//     arguments go in the closure). It must be deterministic given those, must not use
//     parameters of other modules (their gradients would be lost: they are not inputs of
//     the recorded node), and must stay callable until backward has run.
//   - Gradients: the input and parameter gradients are those of running `forward` without
//     Recompute; on CPU with deterministic kernels they are bit-identical. Parameters'
//     gradients reach their .grad through the usual AccumulateGrad nodes, so gradient
//     hooks (the bucketed all-reduce) see them as without checkpointing.
//   - Randomness: the CPU generator's state (and the current CUDA device's, for CUDA inputs)
//     is saved before the forward and restored for the recompute, so dropout draws the same
//     masks; the generators' states after the recompute are what they were before it.
//   - Buffers that `forward` mutates (BatchNorm's running statistics) change once, in the
//     forward: after the recompute's backward, every buffer of `block` is put back as the
//     recompute found it.
//   - Autocast: the recompute runs under the autocast state (enabled flags and dtypes, CPU
//     and CUDA) that was current in the forward.
//   - When grad mode is off or no input or parameter requires grad, this is just
//     forward(inputs).
//   - Higher-order gradients (backward with create_graph) are not supported.
//   - Errors: LibTorch's, thrown as c10::Error (the training loop catches them).
// Threading: as the module's (one training thread); the recompute runs on the autograd
// engine's thread for the device, as any backward function does.

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

#include <functional>
#include <vector>

namespace baton::trainer {

// A block's forward pass over its tensor inputs.
using BlockForward = std::function<at::Tensor(const std::vector<at::Tensor>& inputs)>;

// Runs forward(inputs) for `block` under activation checkpointing (contract above).
at::Tensor Recompute(torch::nn::Module& block, BlockForward forward,
                     const std::vector<at::Tensor>& inputs);

}  // namespace baton::trainer
