#pragma once

// The model interface of the native trainer and the factory that builds one from the
// TrainerSpec's model fields and the dataset's shape.
//
// Models (ModelOptions::model):
//   "mlp"         Flattens the input and runs Mlp (models/mlp.h): input -> hidden... ->
//                 classes. Names: layers.<i>.{weight,bias}.
//   "resnet18",   torchvision's ResNet-18 (BasicBlock [2,2,2,2]) / ResNet-50 (Bottleneck
//   "resnet50"    [3,4,6,3], stride on the 3x3 conv as torchvision >= 0.5), with
//                 torchvision's parameter and buffer names (conv1.weight, bn1.running_mean,
//                 layer1.0.conv1.weight, layer2.0.downsample.0.weight, fc.bias, ...) and
//                 init (conv: kaiming normal, fan_out, relu; BN: 1 and 0; fc: like
//                 nn.Linear). The stem is chosen from the input size: both sides <= 64
//                 (CIFAR 32x32, MNIST 28x28) use the CIFAR stem, a 3x3 conv with stride 1
//                 and no max-pool; larger inputs use the ImageNet stem, a 7x7 conv with
//                 stride 2 and a 3x3 max-pool with stride 2. conv1 takes C input channels
//                 (1 for MNIST). Classification datasets only.
//   "gpt"         A GPT-2 style decoder-only transformer (nanoGPT's layout and names):
//                 token + learned positional embeddings (transformer.wte / transformer.wpe,
//                 block size context_length), gpt_layers blocks of pre-LayerNorm causal
//                 self-attention (gpt_heads heads; attn.c_attn, attn.c_proj) and a GELU MLP
//                 (mlp.c_fc 4x width, mlp.c_proj), a final transformer.ln_f and an output
//                 projection tied to transformer.wte (so "lm_head.weight" is not a separate
//                 parameter). Init: N(0, 0.02), residual projections N(0, 0.02/sqrt(2L)),
//                 zero biases. No dropout. Language-model datasets only.
//   "torchscript" torch::jit::load(torchscript_path): a module saved with
//                 torch.jit.script(m).save(path). Its parameters() are optimised and its
//                 buffers kept, under the module's own names; the weights come from the
//                 file (seed is unused). task "classification": forward(input) must return
//                 logits [B, classes]; "language_model": logits [B, T, vocab]. Checked with a
//                 dry forward of 2 zero samples when the model is made.
//
// Loss and accuracy. Classification: loss = mean cross entropy over the batch, correct =
// samples whose argmax matches, count = B. Language model: loss = mean next-token cross
// entropy over B * T positions, correct = positions whose argmax is the next token,
// count = B * T.
//
// Determinism: built-in models are initialised from a private generator seeded with
// ModelOptions::seed, so every rank builds identical weights for the same options and
// seed, and concurrent construction in several threads is safe.
//
// Threading: a Model is thread-compatible (one training thread uses it).

#include <ATen/core/Tensor.h>
#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "common/spec/trainer_spec_defaults.h"
#include "worker/trainer/data/dataset.h"

namespace baton::trainer {

// (name, tensor) pairs in registration order (the same alias as checkpoint.h's).
using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

// The result of one forward pass on a batch.
struct StepOutput {
  at::Tensor loss;     // float32 scalar: the mean loss (differentiable in training).
  at::Tensor correct;  // int64 scalar on the model's device, no grad: samples (tokens)
                       // predicted right. Read it with .item() only when needed: that syncs.
  int64_t count = 0;   // Samples (classification) or target tokens (language model).
};

// The model fields of TrainerSpec (proto/baton/v1/job.proto); defaults and allowed values:
// common/spec/trainer_spec_defaults.h. A gpt_* or vocab_size / context_length <= 0 means the
// table's default.
struct ModelOptions {
  std::string model;  // "mlp", "resnet18", "resnet50", "gpt", "torchscript".
  // mlp; may be empty (a linear classifier).
  std::vector<int64_t> hidden = std::vector<int64_t>(trainer_spec::kHidden.default_value.begin(),
                                                     trainer_spec::kHidden.default_value.end());
  int64_t gpt_layers = trainer_spec::kGptLayers.default_value;
  int64_t gpt_heads = trainer_spec::kGptHeads.default_value;  // Must divide gpt_width.
  int64_t gpt_width = trainer_spec::kGptWidth.default_value;
  int64_t vocab_size = trainer_spec::kVocabSize.default_value;  // gpt: embedding rows.
  // gpt: positional embeddings (block size).
  int64_t context_length = trainer_spec::kContextLength.default_value;
  std::string torchscript_path;
  // torchscript: or "language_model".
  std::string task = std::string(trainer_spec::kTask.default_value);
  uint64_t seed = trainer_spec::kSeed.default_value;  // Initialisation of built-in models.
  // "none" or "blocks": recompute each residual (resnet*) or transformer (gpt) block's
  // activations in backward instead of keeping them (models/recompute.h). Values and
  // gradients are unchanged.
  std::string activation_checkpointing =
      std::string(trainer_spec::kActivationCheckpointing.default_value);
};

class Model {
 public:
  virtual ~Model() = default;

  // Forward pass + loss on `batch` (already on the model's device). In training mode the
  // loss carries the graph for backward(). LibTorch errors (e.g. a shape mismatch) are
  // thrown as c10::Error; the training loop catches them at its boundary.
  virtual StepOutput Forward(const Batch& batch) = 0;

  // Trainable parameters in registration order (the order of NamedParameters()); stable
  // across To(). Every rank gets the same order.
  virtual std::vector<at::Tensor> Parameters() const = 0;
  // Parameters and buffers (BatchNorm running statistics, ...) under stable dotted names,
  // as Python's state_dict() names them.
  virtual NamedTensors NamedParameters() const = 0;
  virtual NamedTensors NamedBuffers() const = 0;

  // Training (true: BatchNorm uses batch statistics and updates running ones) or
  // evaluation mode. Models start in training mode.
  virtual void Train(bool on) = 0;
  // Moves parameters and buffers to `device` in place (the tensors Parameters() returned
  // stay valid). Call it before creating the optimizer.
  virtual void To(const c10::Device& device) = 0;
};

// Builds ModelOptions::model for data described by `data`.
// Errors: INVALID_ARGUMENT naming the field (unknown model, a model for the other kind of
// dataset, gpt_width not divisible by gpt_heads, a torchscript output of the wrong shape,
// an unknown activation_checkpointing or "blocks" for mlp or torchscript),
// NOT_FOUND if torchscript_path does not exist, DATA_LOSS if it is not a TorchScript
// archive.
absl::StatusOr<std::unique_ptr<Model>> MakeModel(const ModelOptions& options,
                                                 const DatasetInfo& data);

}  // namespace baton::trainer
