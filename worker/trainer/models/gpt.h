#pragma once

// A GPT-2 style decoder-only transformer (nanoGPT's architecture and parameter names):
//   transformer.wte  token embedding [vocab, width] (also the output projection: tied)
//   transformer.wpe  learned positional embedding [context_length, width]
//   transformer.h.<i>.{ln_1, attn.c_attn, attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}
//                    pre-LayerNorm blocks: x += attn(ln_1(x)); x += mlp(ln_2(x)), with
//                    causal multi-head self-attention and a GELU MLP of 4x width
//   transformer.ln_f final LayerNorm
// logits = ln_f(x) @ wte^T. No dropout.
// With checkpoint_blocks, each block runs under Recompute (models/recompute.h): backward
// recomputes its activations; values and gradients are unchanged.

#include <torch/nn/module.h>
#include <torch/nn/modules/container/moduledict.h>
#include <torch/nn/modules/container/modulelist.h>
#include <torch/nn/modules/embedding.h>
#include <torch/nn/modules/normalization.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

#include "common/spec/trainer_spec_defaults.h"

namespace baton::trainer {

// Defaults: TrainerSpec's (common/spec/trainer_spec_defaults.h).
struct GptOptions {
  int64_t vocab_size = trainer_spec::kVocabSize.default_value;
  // Longest sequence (rows of wpe).
  int64_t context_length = trainer_spec::kContextLength.default_value;
  int64_t layers = trainer_spec::kGptLayers.default_value;
  int64_t heads = trainer_spec::kGptHeads.default_value;  // Must divide width.
  int64_t width = trainer_spec::kGptWidth.default_value;
  // Activation checkpointing per transformer block (activation_checkpointing "blocks").
  bool checkpoint_blocks = false;
};

class GptImpl : public torch::nn::Module {
 public:
  // nanoGPT's init from a private generator seeded with `seed`: weights N(0, 0.02), the
  // residual projections (attn.c_proj, mlp.c_proj) N(0, 0.02 / sqrt(2 * layers)), biases
  // 0, LayerNorms 1 and 0. Invalid options throw c10::Error.
  GptImpl(const GptOptions& options, uint64_t seed);

  // tokens: int64 [B, T], T <= context_length. Returns logits [B, T, vocab_size].
  // forward(tokens) == Head(Blocks(Embed(tokens), 0, layers)).
  at::Tensor forward(const at::Tensor& tokens);

  // The pieces forward() is made of, for pipeline stages (pipeline/stage_model.h).
  // wte(tokens) + wpe(positions): [B, T, width].
  at::Tensor Embed(const at::Tensor& tokens);
  // Blocks [begin, end) (checkpointed as options say) on x [B, T, width].
  at::Tensor Blocks(at::Tensor x, int64_t begin, int64_t end);
  // ln_f, then the tied output projection: logits [B, T, vocab_size].
  at::Tensor Head(const at::Tensor& x);
  const GptOptions& options() const { return options_; }

 private:
  GptOptions options_;
  torch::nn::Embedding wte_{nullptr};
  torch::nn::Embedding wpe_{nullptr};
  torch::nn::ModuleList blocks_{nullptr};
  torch::nn::LayerNorm ln_f_{nullptr};
};
TORCH_MODULE(Gpt);

}  // namespace baton::trainer
