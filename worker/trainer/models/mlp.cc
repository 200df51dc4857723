#include "worker/trainer/models/mlp.h"

#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/modules/container/modulelist.h>

#include <cmath>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace baton::trainer {

absl::StatusOr<std::vector<int64_t>> ParseHiddenWidths(absl::string_view spec) {
  std::vector<int64_t> widths;
  if (spec.empty()) return widths;
  for (absl::string_view part : absl::StrSplit(spec, ',')) {
    int64_t width = 0;
    if (!absl::SimpleAtoi(part, &width) || width <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--hidden: '", spec, "' is not a list of widths; must be comma-separated positive "
          "integers"));
    }
    widths.push_back(width);
  }
  return widths;
}

MlpImpl::MlpImpl(const MlpOptions& options, uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  auto list = register_module("layers", torch::nn::ModuleList());
  int64_t in = options.input_dim;
  std::vector<int64_t> outs = options.hidden;
  outs.push_back(options.num_classes);
  at::NoGradGuard no_grad;
  for (const int64_t out : outs) {
    torch::nn::Linear layer(in, out);
    const double bound = 1.0 / std::sqrt(static_cast<double>(in));
    layer->weight.uniform_(-bound, bound, generator);
    layer->bias.uniform_(-bound, bound, generator);
    list->push_back(layer);
    layers_.push_back(layer);
    in = out;
  }
}

at::Tensor MlpImpl::forward(const at::Tensor& inputs) { return Layers(inputs, 0, layers_.size()); }

at::Tensor MlpImpl::Layers(at::Tensor x, size_t begin, size_t end) {
  TORCH_CHECK(begin <= end && end <= layers_.size(), "MLP layers [", begin, ", ", end,
              ") not within ", layers_.size());
  for (size_t i = begin; i < end; ++i) {
    x = layers_[i]->forward(x);
    if (i + 1 < layers_.size()) x = at::relu(x);
  }
  return x;
}

}  // namespace baton::trainer
