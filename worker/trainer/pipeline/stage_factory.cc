#include "worker/trainer/pipeline/stage_factory.h"

#include <ATen/ATen.h>

#include <functional>
#include <numeric>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"
#include "worker/trainer/models/gpt.h"
#include "worker/trainer/models/mlp.h"

namespace baton::trainer::pipeline {
namespace {

namespace ts = ::baton::trainer_spec;

// Names the stage's parameters and releases every other parameter of `module`.
void Partition(torch::nn::Module& module, BuiltStage& built) {
  std::set<const void*> mine;
  for (const at::Tensor& p : built.stage->Parameters()) mine.insert(p.unsafeGetTensorImpl());
  at::NoGradGuard no_grad;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) {
    at::Tensor p = item.value();
    built.model_numel += p.numel();
    if (mine.count(p.unsafeGetTensorImpl()) > 0) {
      built.named.emplace_back(item.key(), p);
      built.stage_numel += p.numel();
    } else {
      p.set_data(at::empty({0}, p.options()));
    }
  }
}

}  // namespace

absl::StatusOr<BuiltStage> BuildStage(const ModelOptions& options, const DatasetInfo& data,
                                      int stage, int stages, const c10::Device& device) {
  // MakeModel's checks of the options against the data, on a model that is dropped at once.
  {
    ModelOptions check = options;
    if (check.model == "gpt") {
      check.gpt_layers = 1;
      check.gpt_width = check.gpt_heads > 0 ? check.gpt_heads : ts::kGptHeads.default_value;
    }
    if (check.model == "mlp") check.hidden.clear();
    if (check.model == "mlp" || check.model == "gpt") {
      ASSIGN_OR_RETURN(std::unique_ptr<Model> unused, MakeModel(check, data));
    }
  }
  BuiltStage built;
  if (options.model == "mlp") {
    for (const int64_t w : options.hidden) {
      if (w <= 0) return absl::InvalidArgumentError("hidden: widths must be > 0");
    }
    const int64_t input_dim = std::accumulate(data.input_shape.begin(), data.input_shape.end(),
                                              int64_t{1}, std::multiplies<int64_t>());
    Mlp mlp(MlpOptions{input_dim, options.hidden, data.num_classes}, options.seed);
    mlp->to(device);
    ASSIGN_OR_RETURN(built.stage, MakeMlpStage(mlp, stage, stages));
    built.flatten_input = true;
    Partition(*mlp, built);
  } else if (options.model == "gpt") {
    GptOptions g;
    g.layers = options.gpt_layers > 0 ? options.gpt_layers : ts::kGptLayers.default_value;
    g.heads = options.gpt_heads > 0 ? options.gpt_heads : ts::kGptHeads.default_value;
    g.width = options.gpt_width > 0 ? options.gpt_width : ts::kGptWidth.default_value;
    g.vocab_size = options.vocab_size > 0 ? options.vocab_size : ts::kVocabSize.default_value;
    g.context_length =
        options.context_length > 0 ? options.context_length : ts::kContextLength.default_value;
    g.checkpoint_blocks = options.activation_checkpointing == "blocks";
    if (g.width % g.heads != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("gpt_width: ", g.width, " is not divisible by gpt_heads ", g.heads));
    }
    Gpt gpt(g, options.seed);
    gpt->to(device);
    ASSIGN_OR_RETURN(built.stage, MakeGptStage(gpt, stage, stages));
    Partition(*gpt, built);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: \"", options.model, "\" cannot be split into pipeline stages (mlp and gpt can)"));
  }
  return built;
}

}  // namespace baton::trainer::pipeline
