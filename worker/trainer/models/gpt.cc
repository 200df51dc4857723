#include "worker/trainer/models/gpt.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/gelu.h>
#include <ATen/ops/linear.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/triu.h>
#include <torch/nn/modules/linear.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "worker/trainer/models/recompute.h"

namespace baton::trainer {
namespace {

constexpr double kInitStd = 0.02;

torch::nn::Linear MakeLinear(int64_t in, int64_t out, double std, at::Generator& gen) {
  torch::nn::Linear linear(in, out);
  at::NoGradGuard no_grad;
  linear->weight.normal_(0.0, std, gen);
  linear->bias.zero_();
  return linear;
}

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  CausalSelfAttentionImpl(const GptOptions& o, double proj_std, at::Generator& gen)
      : heads_(o.heads) {
    c_attn_ = register_module("c_attn", MakeLinear(o.width, 3 * o.width, kInitStd, gen));
    c_proj_ = register_module("c_proj", MakeLinear(o.width, o.width, proj_std, gen));
  }

  at::Tensor forward(const at::Tensor& x) {
    const int64_t b = x.size(0);
    const int64_t t = x.size(1);
    const int64_t c = x.size(2);
    const int64_t hd = c / heads_;
    const std::vector<at::Tensor> qkv = c_attn_->forward(x).split(c, /*dim=*/2);
    // [B, heads, T, head_dim]
    const at::Tensor q = qkv[0].view({b, t, heads_, hd}).transpose(1, 2);
    const at::Tensor k = qkv[1].view({b, t, heads_, hd}).transpose(1, 2);
    const at::Tensor v = qkv[2].view({b, t, heads_, hd}).transpose(1, 2);
    at::Tensor att = q.matmul(k.transpose(-2, -1)) * (1.0 / std::sqrt(static_cast<double>(hd)));
    const at::Tensor future =
        at::ones({t, t}, at::TensorOptions().dtype(at::kBool).device(x.device())).triu(1);
    att = at::softmax(att.masked_fill(future, -std::numeric_limits<float>::infinity()), -1);
    const at::Tensor y = att.matmul(v).transpose(1, 2).contiguous().view({b, t, c});
    return c_proj_->forward(y);
  }

 private:
  int64_t heads_;
  torch::nn::Linear c_attn_{nullptr}, c_proj_{nullptr};
};
TORCH_MODULE(CausalSelfAttention);

class MlpBlockImpl : public torch::nn::Module {
 public:
  MlpBlockImpl(const GptOptions& o, double proj_std, at::Generator& gen) {
    c_fc_ = register_module("c_fc", MakeLinear(o.width, 4 * o.width, kInitStd, gen));
    c_proj_ = register_module("c_proj", MakeLinear(4 * o.width, o.width, proj_std, gen));
  }
  at::Tensor forward(const at::Tensor& x) { return c_proj_->forward(at::gelu(c_fc_->forward(x))); }

 private:
  torch::nn::Linear c_fc_{nullptr}, c_proj_{nullptr};
};
TORCH_MODULE(MlpBlock);

class BlockImpl : public torch::nn::Module {
 public:
  BlockImpl(const GptOptions& o, double proj_std, at::Generator& gen) {
    using torch::nn::LayerNorm;
    using torch::nn::LayerNormOptions;
    ln_1_ = register_module("ln_1", LayerNorm(LayerNormOptions({o.width})));
    attn_ = register_module("attn", CausalSelfAttention(o, proj_std, gen));
    ln_2_ = register_module("ln_2", LayerNorm(LayerNormOptions({o.width})));
    mlp_ = register_module("mlp", MlpBlock(o, proj_std, gen));
  }
  at::Tensor forward(at::Tensor x) {
    x = x + attn_->forward(ln_1_->forward(x));
    return x + mlp_->forward(ln_2_->forward(x));
  }

 private:
  torch::nn::LayerNorm ln_1_{nullptr}, ln_2_{nullptr};
  CausalSelfAttention attn_{nullptr};
  MlpBlock mlp_{nullptr};
};
TORCH_MODULE(Block);

}  // namespace

GptImpl::GptImpl(const GptOptions& options, uint64_t seed) : options_(options) {
  TORCH_CHECK(options.vocab_size > 0 && options.context_length > 0 && options.layers > 0 &&
                  options.heads > 0 && options.width > 0,
              "GPT sizes must be positive");
  TORCH_CHECK(options.width % options.heads == 0, "GPT width ", options.width,
              " is not divisible by heads ", options.heads);
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const double proj_std = kInitStd / std::sqrt(2.0 * static_cast<double>(options.layers));
  torch::nn::ModuleDict transformer;
  wte_ = torch::nn::Embedding(options.vocab_size, options.width);
  wpe_ = torch::nn::Embedding(options.context_length, options.width);
  {
    at::NoGradGuard no_grad;
    wte_->weight.normal_(0.0, kInitStd, gen);
    wpe_->weight.normal_(0.0, kInitStd, gen);
  }
  blocks_ = torch::nn::ModuleList();
  for (int64_t i = 0; i < options.layers; ++i) blocks_->push_back(Block(options, proj_std, gen));
  ln_f_ = torch::nn::LayerNorm(torch::nn::LayerNormOptions({options.width}));
  transformer->update(
      {{"wte", wte_.ptr()}, {"wpe", wpe_.ptr()}, {"h", blocks_.ptr()}, {"ln_f", ln_f_.ptr()}});
  register_module("transformer", transformer);
}

at::Tensor GptImpl::forward(const at::Tensor& tokens) {
  return Head(Blocks(Embed(tokens), 0, options_.layers));
}

at::Tensor GptImpl::Embed(const at::Tensor& tokens) {
  const int64_t t = tokens.size(1);
  TORCH_CHECK(t <= options_.context_length, "sequence of ", t,
              " tokens is longer than context_length ", options_.context_length);
  const at::Tensor pos =
      at::arange(t, at::TensorOptions().dtype(at::kLong).device(tokens.device()));
  return wte_->forward(tokens) + wpe_->forward(pos);
}

at::Tensor GptImpl::Blocks(at::Tensor x, int64_t begin, int64_t end) {
  TORCH_CHECK(0 <= begin && begin <= end && end <= options_.layers, "GPT blocks [", begin, ", ",
              end, ") not within ", options_.layers, " layers");
  for (int64_t i = begin; i < end; ++i) {
    BlockImpl* block = (*blocks_)[i]->as<BlockImpl>();
    if (options_.checkpoint_blocks) {
      x = Recompute(*block,
                    [block](const std::vector<at::Tensor>& in) { return block->forward(in[0]); },
                    {x});
    } else {
      x = block->forward(x);
    }
  }
  return x;
}

at::Tensor GptImpl::Head(const at::Tensor& x) {
  return at::linear(ln_f_->forward(x), wte_->weight);  // Tied output projection.
}

}  // namespace baton::trainer
