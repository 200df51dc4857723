#include "worker/trainer/models/resnet.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ops/adaptive_avg_pool2d.h>
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/relu.h>

#include <cmath>
#include <string>
#include <vector>

#include "worker/trainer/models/recompute.h"

namespace baton::trainer {
namespace {

using torch::nn::BatchNorm2d;
using torch::nn::Conv2d;
using torch::nn::Conv2dOptions;

Conv2d MakeConv(int64_t in, int64_t out, int64_t kernel, int64_t stride, at::Generator& gen) {
  Conv2d conv(Conv2dOptions(in, out, kernel).stride(stride).padding(kernel / 2).bias(false));
  // kaiming_normal_(mode="fan_out", nonlinearity="relu").
  const double fan_out = static_cast<double>(out * kernel * kernel);
  at::NoGradGuard no_grad;
  conv->weight.normal_(0.0, std::sqrt(2.0 / fan_out), gen);
  return conv;
}

// The 1x1 conv + BatchNorm shortcut of a block that changes shape.
torch::nn::Sequential MakeDownsample(int64_t in, int64_t out, int64_t stride, at::Generator& gen) {
  torch::nn::Sequential s;
  s->push_back(MakeConv(in, out, 1, stride, gen));
  s->push_back(BatchNorm2d(out));
  return s;
}

class BasicBlockImpl : public torch::nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;

  BasicBlockImpl(int64_t in, int64_t planes, int64_t stride, at::Generator& gen) {
    conv1_ = register_module("conv1", MakeConv(in, planes, 3, stride, gen));
    bn1_ = register_module("bn1", BatchNorm2d(planes));
    conv2_ = register_module("conv2", MakeConv(planes, planes, 3, 1, gen));
    bn2_ = register_module("bn2", BatchNorm2d(planes));
    if (stride != 1 || in != planes * kExpansion) {
      downsample_ =
          register_module("downsample", MakeDownsample(in, planes * kExpansion, stride, gen));
    }
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out = at::relu(bn1_->forward(conv1_->forward(x)));
    out = bn2_->forward(conv2_->forward(out));
    out = out + (downsample_ ? downsample_->forward(x) : x);
    return at::relu(out);
  }

 private:
  Conv2d conv1_{nullptr}, conv2_{nullptr};
  BatchNorm2d bn1_{nullptr}, bn2_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(BasicBlock);

class BottleneckImpl : public torch::nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;

  BottleneckImpl(int64_t in, int64_t planes, int64_t stride, at::Generator& gen) {
    conv1_ = register_module("conv1", MakeConv(in, planes, 1, 1, gen));
    bn1_ = register_module("bn1", BatchNorm2d(planes));
    conv2_ = register_module("conv2", MakeConv(planes, planes, 3, stride, gen));
    bn2_ = register_module("bn2", BatchNorm2d(planes));
    conv3_ = register_module("conv3", MakeConv(planes, planes * kExpansion, 1, 1, gen));
    bn3_ = register_module("bn3", BatchNorm2d(planes * kExpansion));
    if (stride != 1 || in != planes * kExpansion) {
      downsample_ =
          register_module("downsample", MakeDownsample(in, planes * kExpansion, stride, gen));
    }
  }

  at::Tensor forward(const at::Tensor& x) {
    at::Tensor out = at::relu(bn1_->forward(conv1_->forward(x)));
    out = at::relu(bn2_->forward(conv2_->forward(out)));
    out = bn3_->forward(conv3_->forward(out));
    out = out + (downsample_ ? downsample_->forward(x) : x);
    return at::relu(out);
  }

 private:
  Conv2d conv1_{nullptr}, conv2_{nullptr}, conv3_{nullptr};
  BatchNorm2d bn1_{nullptr}, bn2_{nullptr}, bn3_{nullptr};
  torch::nn::Sequential downsample_{nullptr};
};
TORCH_MODULE(Bottleneck);

}  // namespace

ResNetImpl::ResNetImpl(const ResNetOptions& options, uint64_t seed)
    : cifar_stem_(options.cifar_stem), checkpoint_blocks_(options.checkpoint_blocks) {
  TORCH_CHECK(options.depth == 18 || options.depth == 50, "ResNet depth must be 18 or 50, got ",
              options.depth);
  at::Generator gen = at::detail::createCPUGenerator(seed);
  const bool bottleneck = options.depth == 50;
  const std::vector<int64_t> blocks =
      bottleneck ? std::vector<int64_t>{3, 4, 6, 3} : std::vector<int64_t>{2, 2, 2, 2};
  const int64_t expansion = bottleneck ? BottleneckImpl::kExpansion : BasicBlockImpl::kExpansion;

  conv1_ = register_module("conv1", cifar_stem_ ? MakeConv(options.in_channels, 64, 3, 1, gen)
                                                : MakeConv(options.in_channels, 64, 7, 2, gen));
  bn1_ = register_module("bn1", BatchNorm2d(64));
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    const int64_t planes = int64_t{64} << stage;
    torch::nn::Sequential layer;
    for (int64_t b = 0; b < blocks[stage]; ++b) {
      const int64_t stride = (stage > 0 && b == 0) ? 2 : 1;
      if (bottleneck) {
        layer->push_back(Bottleneck(in, planes, stride, gen));
      } else {
        layer->push_back(BasicBlock(in, planes, stride, gen));
      }
      in = planes * expansion;
    }
    layers_[stage] = register_module("layer" + std::to_string(stage + 1), layer);
  }
  fc_ = register_module("fc", torch::nn::Linear(in, options.num_classes));
  at::NoGradGuard no_grad;
  const double bound = 1.0 / std::sqrt(static_cast<double>(in));
  fc_->weight.uniform_(-bound, bound, gen);
  fc_->bias.uniform_(-bound, bound, gen);
}

at::Tensor ResNetImpl::forward(const at::Tensor& x) {
  at::Tensor out = at::relu(bn1_->forward(conv1_->forward(x)));
  if (!cifar_stem_)
    out = at::max_pool2d(out, /*kernel_size=*/{3, 3}, /*stride=*/{2, 2}, /*padding=*/{1, 1});
  for (torch::nn::Sequential& layer : layers_) {
    if (!checkpoint_blocks_) {
      out = layer->forward(out);
      continue;
    }
    for (const torch::nn::AnyModule& block : *layer) {
      // A shallow copy (it shares the module) that backward's recompute can call.
      out = Recompute(
          *block.ptr(),
          [module = torch::nn::AnyModule(block)](const std::vector<at::Tensor>& in) mutable {
            return module.forward(in[0]);
          },
          {out});
    }
  }
  out = at::adaptive_avg_pool2d(out, {1, 1}).flatten(1);
  return fc_->forward(out);
}

}  // namespace baton::trainer
