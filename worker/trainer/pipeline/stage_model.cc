#include "worker/trainer/pipeline/stage_model.h"

#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace baton::trainer::pipeline {
namespace {

absl::Status CheckStage(int stage, int stages) {
  if (stages < 1 || stage < 0 || stage >= stages) {
    return absl::InvalidArgumentError(
        absl::StrCat("pipeline stage ", stage, " is not a stage of ", stages));
  }
  return absl::OkStatus();
}

// The parameters of `module` whose names `keep` accepts, in the module's order.
template <typename Keep>
std::vector<at::Tensor> NamedParameters(const torch::nn::Module& module, Keep keep) {
  std::vector<at::Tensor> out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    if (keep(item.key())) out.push_back(item.value());
  }
  return out;
}

class GptStage final : public StageModel {
 public:
  GptStage(Gpt model, int stage, int stages, LayerRange blocks)
      : StageModel(stage, stages), model_(std::move(model)), blocks_(blocks) {}

  at::Tensor Forward(const at::Tensor& input) override {
    at::Tensor x = first() ? model_->Embed(input) : input;
    x = model_->Blocks(x, blocks_.begin, blocks_.end);
    return last() ? model_->Head(x) : x;
  }

  std::vector<at::Tensor> Parameters() const override {
    return NamedParameters(*model_, [this](const std::string& name) { return Owns(name); });
  }

  std::vector<at::Tensor> TiedParameters() const override {
    if (TiedPeer() < 0) return {};
    return NamedParameters(
        *model_, [](const std::string& name) { return name == "transformer.wte.weight"; });
  }

  // The first and the last stage both use wte (embedding, output projection).
  int TiedPeer() const override {
    if (stages() == 1) return -1;
    if (first()) return stages() - 1;
    if (last()) return 0;
    return -1;
  }

 private:
  bool Owns(const std::string& name) const {
    if (name == "transformer.wte.weight") return first() || last();
    if (absl::StartsWith(name, "transformer.wpe.")) return first();
    if (absl::StartsWith(name, "transformer.ln_f.")) return last();
    for (int64_t i = blocks_.begin; i < blocks_.end; ++i) {
      if (absl::StartsWith(name, absl::StrCat("transformer.h.", i, "."))) return true;
    }
    return false;
  }

  Gpt model_;
  const LayerRange blocks_;
};

class MlpStage final : public StageModel {
 public:
  MlpStage(Mlp model, int stage, int stages, LayerRange layers)
      : StageModel(stage, stages), model_(std::move(model)), layers_(layers) {}

  at::Tensor Forward(const at::Tensor& input) override {
    return model_->Layers(input, static_cast<size_t>(layers_.begin),
                          static_cast<size_t>(layers_.end));
  }

  std::vector<at::Tensor> Parameters() const override {
    return NamedParameters(*model_, [this](const std::string& name) {
      for (int64_t i = layers_.begin; i < layers_.end; ++i) {
        if (absl::StartsWith(name, absl::StrCat("layers.", i, "."))) return true;
      }
      return false;
    });
  }

 private:
  Mlp model_;
  const LayerRange layers_;
};

}  // namespace

absl::StatusOr<std::vector<LayerRange>> SplitLayers(int64_t layers, int stages) {
  if (stages < 1 || stages > layers) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot split ", layers, " layers into ", stages, " pipeline stages"));
  }
  std::vector<LayerRange> out;
  int64_t begin = 0;
  for (int s = 0; s < stages; ++s) {
    const int64_t n = layers / stages + (s < layers % stages ? 1 : 0);
    out.push_back({begin, begin + n});
    begin += n;
  }
  return out;
}

absl::StatusOr<std::unique_ptr<StageModel>> MakeGptStage(Gpt model, int stage, int stages) {
  if (absl::Status s = CheckStage(stage, stages); !s.ok()) return s;
  absl::StatusOr<std::vector<LayerRange>> split = SplitLayers(model->options().layers, stages);
  if (!split.ok()) return split.status();
  return std::unique_ptr<StageModel>(
      new GptStage(std::move(model), stage, stages, (*split)[stage]));
}

absl::StatusOr<std::unique_ptr<StageModel>> MakeMlpStage(Mlp model, int stage, int stages) {
  if (absl::Status s = CheckStage(stage, stages); !s.ok()) return s;
  absl::StatusOr<std::vector<LayerRange>> split =
      SplitLayers(static_cast<int64_t>(model->num_layers()), stages);
  if (!split.ok()) return split.status();
  return std::unique_ptr<StageModel>(
      new MlpStage(std::move(model), stage, stages, (*split)[stage]));
}

}  // namespace baton::trainer::pipeline
