#pragma once

// The built-in model: a multi-layer perceptron input -> hidden[0] -> ... -> classes with
// ReLU between layers (none after the last). Parameter names are "layers.<i>.weight" and
// "layers.<i>.bias", i = 0 .. hidden.size().

#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>
#include <torch/nn/pimpl.h>

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/spec/trainer_spec_defaults.h"

namespace baton::trainer {

struct MlpOptions {
  int64_t input_dim = 784;
  // May be empty (a linear classifier).
  std::vector<int64_t> hidden = std::vector<int64_t>(trainer_spec::kHidden.default_value.begin(),
                                                     trainer_spec::kHidden.default_value.end());
  int64_t num_classes = trainer_spec::kNumClasses.default_value;
};

// Parses --hidden: comma-separated positive integers ("256,128"); "" means no hidden layer.
// INVALID_ARGUMENT on anything else. How many and how wide is for the caller to check
// (TrainerSpec.hidden's range: common/spec/trainer_spec_defaults.h).
absl::StatusOr<std::vector<int64_t>> ParseHiddenWidths(absl::string_view spec);

class MlpImpl : public torch::nn::Module {
 public:
  // Initialises like torch.nn.Linear (weights and biases uniform in +-1/sqrt(fan_in)), but
  // from a private generator seeded with `seed`, so the weights depend only on
  // (options, seed): every rank builds the same model, and concurrent construction in
  // several threads is safe.
  MlpImpl(const MlpOptions& options, uint64_t seed);

  // inputs: float [B, input_dim]. Returns logits [B, num_classes].
  // forward(x) == Layers(x, 0, num_layers()).
  at::Tensor forward(const at::Tensor& inputs);

  // For pipeline stages (pipeline/stage_model.h): layers [begin, end) on x, each but the
  // model's last followed by ReLU.
  at::Tensor Layers(at::Tensor x, size_t begin, size_t end);
  size_t num_layers() const { return layers_.size(); }

 private:
  std::vector<torch::nn::Linear> layers_;
};
TORCH_MODULE(Mlp);

}  // namespace baton::trainer
