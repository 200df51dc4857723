#include "worker/trainer/models/model.h"

#include <ATen/ops/argmax.h>
#include <ATen/ops/cross_entropy_loss.h>
#include <ATen/ops/zeros.h>
#include <torch/script.h>

#include <filesystem>
#include <functional>
#include <numeric>
#include <system_error>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"
#include "worker/trainer/models/gpt.h"
#include "worker/trainer/models/mlp.h"
#include "worker/trainer/models/resnet.h"

namespace baton::trainer {
namespace {

// Both stems work on any size; the CIFAR stem keeps small inputs from collapsing to 1x1.
constexpr int64_t kMaxCifarStemSide = 64;

std::string ErrorText(const std::exception& e) {
  if (const auto* c10 = dynamic_cast<const c10::Error*>(&e)) return c10->what_without_backtrace();
  return e.what();
}

// Loss, correct and count from logits: [B, C] with target [B], or [B, T, V] with [B, T].
StepOutput LossFromLogits(const at::Tensor& logits, const at::Tensor& target, bool language_model) {
  StepOutput out;
  if (language_model) {
    out.loss = at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}));
  } else {
    out.loss = at::cross_entropy_loss(logits, target);
  }
  out.count = target.numel();
  at::NoGradGuard no_grad;
  out.correct = logits.detach().argmax(-1).eq(target).sum();
  return out;
}

NamedTensors ToNamed(const torch::OrderedDict<std::string, at::Tensor>& dict) {
  NamedTensors out;
  out.reserve(dict.size());
  for (const auto& item : dict) out.emplace_back(item.key(), item.value());
  return out;
}

// A built-in torch::nn model: `logits` maps a batch's input to logits.
class NnModel final : public Model {
 public:
  NnModel(std::shared_ptr<torch::nn::Module> module,
          std::function<at::Tensor(const at::Tensor&)> logits, bool language_model)
      : module_(std::move(module)), logits_(std::move(logits)), language_model_(language_model) {
    module_->train(true);
  }

  StepOutput Forward(const Batch& batch) override {
    return LossFromLogits(logits_(batch.input), batch.target, language_model_);
  }
  std::vector<at::Tensor> Parameters() const override { return module_->parameters(); }
  NamedTensors NamedParameters() const override { return ToNamed(module_->named_parameters()); }
  NamedTensors NamedBuffers() const override { return ToNamed(module_->named_buffers()); }
  void Train(bool on) override { module_->train(on); }
  void To(const c10::Device& device) override { module_->to(device); }

 private:
  const std::shared_ptr<torch::nn::Module> module_;
  const std::function<at::Tensor(const at::Tensor&)> logits_;
  const bool language_model_;
};

// A TorchScript module saved by Python.
class ScriptModel final : public Model {
 public:
  ScriptModel(torch::jit::Module module, bool language_model)
      : module_(std::move(module)), language_model_(language_model) {
    module_.train(true);
  }

  StepOutput Forward(const Batch& batch) override {
    return LossFromLogits(Logits(batch.input), batch.target, language_model_);
  }
  at::Tensor Logits(const at::Tensor& input) {
    const c10::IValue out = module_.forward({input});
    TORCH_CHECK(out.isTensor(), "the TorchScript module's forward() returned ", out.tagKind(),
                ", not a Tensor");
    return out.toTensor();
  }
  std::vector<at::Tensor> Parameters() const override {
    std::vector<at::Tensor> out;
    for (const at::Tensor& p : module_.parameters()) {
      if (p.requires_grad()) out.push_back(p);
    }
    return out;
  }
  NamedTensors NamedParameters() const override {
    NamedTensors out;
    for (const auto& item : module_.named_parameters()) out.emplace_back(item.name, item.value);
    return out;
  }
  NamedTensors NamedBuffers() const override {
    NamedTensors out;
    for (const auto& item : module_.named_buffers()) out.emplace_back(item.name, item.value);
    return out;
  }
  void Train(bool on) override { module_.train(on); }
  void To(const c10::Device& device) override { module_.to(device); }

 private:
  mutable torch::jit::Module module_;  // parameters() is non-const in LibTorch.
  const bool language_model_;
};

absl::Status RequireKind(const ModelOptions& options, const DatasetInfo& data,
                         bool language_model) {
  if (data.language_model == language_model) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrFormat(
      "model: \"%s\" is a %s model but dataset \"%s\" is %s", options.model,
      language_model ? "language" : "classification", data.name,
      data.language_model ? "a language-model (token) dataset" : "a classification dataset"));
}

// "blocks" needs a model made of blocks; whether the model is one is
// trainer_spec::HasCheckpointableBlocks.
absl::StatusOr<bool> CheckpointBlocks(const ModelOptions& o) {
  namespace ts = ::baton::trainer_spec;
  RETURN_IF_ERROR(ts::Check(ts::kActivationCheckpointing, o.activation_checkpointing,
                            ts::kActivationCheckpointing.name));
  if (o.activation_checkpointing != "blocks") return false;
  if (!ts::HasCheckpointableBlocks(o.model)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "activation_checkpointing: \"blocks\" needs a model made of blocks (resnet18, "
        "resnet50, gpt); model \"%s\" has none, use \"none\"",
        o.model));
  }
  return true;
}

absl::StatusOr<std::unique_ptr<Model>> MakeMlp(const ModelOptions& o, const DatasetInfo& data) {
  RETURN_IF_ERROR(RequireKind(o, data, false));
  for (const int64_t w : o.hidden) {
    if (w <= 0) return absl::InvalidArgumentError("hidden: widths must be > 0");
  }
  const int64_t input_dim = std::accumulate(data.input_shape.begin(), data.input_shape.end(),
                                            int64_t{1}, std::multiplies<int64_t>());
  Mlp mlp(MlpOptions{input_dim, o.hidden, data.num_classes}, o.seed);
  return std::make_unique<NnModel>(
      mlp.ptr(), [m = mlp.get()](const at::Tensor& x) { return m->forward(x.flatten(1)); }, false);
}

absl::StatusOr<std::unique_ptr<Model>> MakeResNet(const ModelOptions& o, const DatasetInfo& data,
                                                  int depth) {
  RETURN_IF_ERROR(RequireKind(o, data, false));
  if (data.input_shape.size() != 3) {
    return absl::InvalidArgumentError(
        absl::StrFormat("model: \"%s\" needs image input [C, H, W], dataset \"%s\" has [%s]",
                        o.model, data.name, absl::StrJoin(data.input_shape, ", ")));
  }
  ResNetOptions r;
  r.depth = depth;
  r.in_channels = data.input_shape[0];
  r.num_classes = data.num_classes;
  r.cifar_stem =
      data.input_shape[1] <= kMaxCifarStemSide && data.input_shape[2] <= kMaxCifarStemSide;
  ASSIGN_OR_RETURN(r.checkpoint_blocks, CheckpointBlocks(o));
  ResNet net(r, o.seed);
  return std::make_unique<NnModel>(
      net.ptr(), [m = net.get()](const at::Tensor& x) { return m->forward(x); }, false);
}

absl::StatusOr<std::unique_ptr<Model>> MakeGpt(const ModelOptions& o, const DatasetInfo& data) {
  RETURN_IF_ERROR(RequireKind(o, data, true));
  GptOptions g;
  namespace ts = ::baton::trainer_spec;
  g.layers = o.gpt_layers > 0 ? o.gpt_layers : ts::kGptLayers.default_value;
  g.heads = o.gpt_heads > 0 ? o.gpt_heads : ts::kGptHeads.default_value;
  g.width = o.gpt_width > 0 ? o.gpt_width : ts::kGptWidth.default_value;
  g.vocab_size = o.vocab_size > 0 ? o.vocab_size : ts::kVocabSize.default_value;
  g.context_length = o.context_length > 0 ? o.context_length : ts::kContextLength.default_value;
  ASSIGN_OR_RETURN(g.checkpoint_blocks, CheckpointBlocks(o));
  if (g.width % g.heads != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("gpt_width: %d is not divisible by gpt_heads %d", g.width, g.heads));
  }
  if (data.vocab_size > g.vocab_size) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "vocab_size: the model has %d embeddings but dataset \"%s\" has ids up to %d", g.vocab_size,
        data.name, data.vocab_size - 1));
  }
  if (!data.input_shape.empty() && data.input_shape[0] > g.context_length) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "context_length: the model's %d positions are fewer than the dataset's %d tokens",
        g.context_length, data.input_shape[0]));
  }
  Gpt gpt(g, o.seed);
  return std::make_unique<NnModel>(
      gpt.ptr(), [m = gpt.get()](const at::Tensor& x) { return m->forward(x); }, true);
}

absl::StatusOr<std::unique_ptr<Model>> MakeScriptModel(const ModelOptions& o,
                                                       const DatasetInfo& data) {
  const std::string task = o.task.empty() ? "classification" : o.task;
  if (task != "classification" && task != "language_model") {
    return absl::InvalidArgumentError(
        absl::StrCat("task: \"", task, "\" is not \"classification\" or \"language_model\""));
  }
  const bool language_model = task == "language_model";
  if (data.language_model != language_model) {
    return absl::InvalidArgumentError(
        absl::StrFormat("task: \"%s\" does not match dataset \"%s\" (%s)", task, data.name,
                        data.language_model ? "token sequences: use task language_model"
                                            : "labelled samples: use task classification"));
  }
  const std::string& path = o.torchscript_path;
  if (path.empty())
    return absl::InvalidArgumentError("torchscript_path: required for model \"torchscript\"");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file (torchscript_path)"));
  }
  torch::jit::Module module;
  try {
    module = torch::jit::load(path);
  } catch (const std::exception& e) {
    return absl::DataLossError(absl::StrCat(
        path, ": not a TorchScript module saved by torch.jit.script(m).save(): ", ErrorText(e)));
  }
  auto model = std::make_unique<ScriptModel>(std::move(module), language_model);

  // Dry run on two zero samples: the output must be logits of the right shape.
  std::vector<int64_t> shape = {2};
  shape.insert(shape.end(), data.input_shape.begin(), data.input_shape.end());
  const at::Tensor input = at::zeros(shape, language_model ? at::kLong : at::kFloat);
  const std::string input_text = absl::StrFormat("[%s] %s input", absl::StrJoin(shape, ", "),
                                                 language_model ? "int64" : "float32");
  at::Tensor logits;
  try {
    at::NoGradGuard no_grad;
    model->Train(false);
    logits = model->Logits(input);
    model->Train(true);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("torchscript_path: ", path, ": forward() on a ",
                                                   input_text, " failed: ", ErrorText(e)));
  }
  const std::string got = absl::StrJoin(logits.sizes(), ", ");
  if (language_model) {
    if (logits.dim() != 3 || logits.size(0) != 2 || logits.size(1) != shape[1]) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "torchscript_path: %s: task language_model needs logits [batch, seq, vocab] = [2, %d, "
          "V] for a %s, got [%s]",
          path, shape[1], input_text, got));
    }
  } else if (logits.dim() != 2 || logits.size(0) != 2 || logits.size(1) < data.num_classes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "torchscript_path: %s: task classification needs logits [batch, classes] = [2, >= %d] "
        "for a %s, got [%s]",
        path, data.num_classes, input_text, got));
  }
  return model;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Model>> MakeModel(const ModelOptions& options,
                                                 const DatasetInfo& data) {
  if (options.model == "mlp" || options.model == "torchscript") {
    RETURN_IF_ERROR(CheckpointBlocks(options).status());
  }
  try {
    if (options.model == "mlp") return MakeMlp(options, data);
    if (options.model == "resnet18") return MakeResNet(options, data, 18);
    if (options.model == "resnet50") return MakeResNet(options, data, 50);
    if (options.model == "gpt") return MakeGpt(options, data);
    if (options.model == "torchscript") return MakeScriptModel(options, data);
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat("model: cannot build \"", options.model, "\": ", ErrorText(e)));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("model: unknown model \"", options.model,
                   "\" (expected mlp, resnet18, resnet50, gpt or torchscript)"));
}

}  // namespace baton::trainer
