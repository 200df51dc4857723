#pragma once

// torchvision's ResNet-18 and ResNet-50 as LibTorch modules, with torchvision's parameter
// and buffer names (conv1.weight, bn1.running_mean, layer1.0.conv1.weight,
// layer2.0.downsample.1.weight, fc.bias, ...), so weights round-trip with Python.
//
//   ResNet-18: BasicBlock (two 3x3 convs), blocks [2, 2, 2, 2], 512 features.
//   ResNet-50: Bottleneck (1x1, 3x3, 1x1 x4; the stride on the 3x3 conv, torchvision >=
//              0.5 "ResNet V1.5"), blocks [3, 4, 6, 3], 2048 features.
//   Stem: ImageNet (7x7 conv stride 2 + 3x3 max-pool stride 2) or CIFAR (3x3 conv stride 1,
//         no max-pool; for 32x32 inputs, where the ImageNet stem would leave 1x1 maps).
//   Then global average pooling and a linear classifier `fc`.
// With checkpoint_blocks, each residual block runs under Recompute (models/recompute.h):
// backward recomputes its activations; values, gradients and BatchNorm statistics are
// unchanged.

#include <torch/nn/module.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/conv.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>

namespace baton::trainer {

struct ResNetOptions {
  int depth = 18;           // 18 or 50.
  int64_t in_channels = 3;  // Channels of the input images.
  int64_t num_classes = 1000;
  bool cifar_stem = false;
  // Activation checkpointing per residual block (activation_checkpointing "blocks").
  bool checkpoint_blocks = false;
};

class ResNetImpl : public torch::nn::Module {
 public:
  // Initialised like torchvision (conv: kaiming normal, fan_out, relu; BatchNorm weight 1,
  // bias 0; fc: uniform +-1/sqrt(fan_in)) from a private generator seeded with `seed`.
  // options.depth must be 18 or 50 (checked by LibTorch: c10::Error otherwise).
  ResNetImpl(const ResNetOptions& options, uint64_t seed);

  // x: float [B, in_channels, H, W]. Returns logits [B, num_classes].
  at::Tensor forward(const at::Tensor& x);

 private:
  bool cifar_stem_;
  bool checkpoint_blocks_;
  torch::nn::Conv2d conv1_{nullptr};
  torch::nn::BatchNorm2d bn1_{nullptr};
  torch::nn::Sequential layers_[4] = {nullptr, nullptr, nullptr, nullptr};
  torch::nn::Linear fc_{nullptr};
};
TORCH_MODULE(ResNet);

}  // namespace baton::trainer
