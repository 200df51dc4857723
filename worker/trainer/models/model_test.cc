#include "worker/trainer/models/model.h"

#include <ATen/ATen.h>
#include <torch/csrc/autograd/function.h>
#include <torch/optim/adam.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <unordered_set>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/models/gpt.h"

namespace baton::trainer {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Not;

DatasetInfo Images(int64_t c, int64_t side, int64_t classes) {
  DatasetInfo info;
  info.name = "images";
  info.num_classes = classes;
  info.input_shape = {c, side, side};
  return info;
}

DatasetInfo Tokens(int64_t t, int64_t vocab) {
  DatasetInfo info;
  info.name = "tokens";
  info.language_model = true;
  info.input_shape = {t};
  info.vocab_size = vocab;
  return info;
}

std::unique_ptr<Model> MustMake(const ModelOptions& o, const DatasetInfo& info) {
  absl::StatusOr<std::unique_ptr<Model>> m = MakeModel(o, info);
  EXPECT_OK(m);
  return m.ok() ? *std::move(m) : nullptr;
}

std::map<std::string, std::vector<int64_t>> Shapes(const NamedTensors& named) {
  std::map<std::string, std::vector<int64_t>> out;
  for (const auto& [name, t] : named) out[name] = t.sizes().vec();
  return out;
}

int64_t CountParameters(const Model& m) {
  int64_t n = 0;
  for (const at::Tensor& p : m.Parameters()) n += p.numel();
  return n;
}

// Runs `steps` optimizer steps on one fixed batch; returns the losses.
std::vector<double> Overfit(Model& m, const Batch& batch, torch::optim::Optimizer& opt, int steps) {
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) {
    opt.zero_grad();
    const StepOutput out = m.Forward(batch);
    out.loss.backward();
    opt.step();
    losses.push_back(out.loss.item<double>());
  }
  return losses;
}

Batch ImageBatch(int64_t b, int64_t c, int64_t side, int64_t classes, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return Batch{at::randn({b, c, side, side}, gen), at::randint(classes, {b}, gen)};
}

TEST(ResNetTest, TorchvisionParameterCountsNamesAndStems) {
  // ImageNet-size input: the 7x7 stem; 1000 classes reproduce torchvision's counts.
  std::unique_ptr<Model> r18 = MustMake({.model = "resnet18"}, Images(3, 96, 1000));
  std::unique_ptr<Model> r50 = MustMake({.model = "resnet50"}, Images(3, 96, 1000));
  EXPECT_EQ(CountParameters(*r18), 11689512);
  EXPECT_EQ(CountParameters(*r50), 25557032);
  const auto shapes18 = Shapes(r18->NamedParameters());
  EXPECT_EQ(shapes18.at("conv1.weight"), (std::vector<int64_t>{64, 3, 7, 7}));
  EXPECT_EQ(shapes18.at("layer2.0.downsample.0.weight"), (std::vector<int64_t>{128, 64, 1, 1}));
  EXPECT_EQ(shapes18.at("layer4.1.bn2.bias"), (std::vector<int64_t>{512}));
  EXPECT_EQ(shapes18.at("fc.weight"), (std::vector<int64_t>{1000, 512}));
  const auto shapes50 = Shapes(r50->NamedParameters());
  EXPECT_EQ(shapes50.at("layer1.0.conv3.weight"), (std::vector<int64_t>{256, 64, 1, 1}));
  EXPECT_EQ(shapes50.at("layer3.5.conv2.weight"), (std::vector<int64_t>{256, 256, 3, 3}));
  EXPECT_EQ(shapes50.at("fc.weight"), (std::vector<int64_t>{1000, 2048}));
  EXPECT_EQ(r18->NamedParameters().front().first, "conv1.weight");
  EXPECT_EQ(r18->NamedParameters().back().first, "fc.bias");
  const auto buffers = Shapes(r18->NamedBuffers());
  EXPECT_THAT(buffers, Contains(Key("bn1.running_mean")));
  EXPECT_THAT(buffers, Contains(Key("layer1.0.bn1.running_var")));
  EXPECT_THAT(buffers, Contains(Key("bn1.num_batches_tracked")));

  // 32x32 (CIFAR) and 28x28 one-channel (MNIST): the 3x3 stride-1 stem.
  std::unique_ptr<Model> cifar = MustMake({.model = "resnet18"}, Images(3, 32, 10));
  EXPECT_EQ(Shapes(cifar->NamedParameters()).at("conv1.weight"),
            (std::vector<int64_t>{64, 3, 3, 3}));
  std::unique_ptr<Model> mnist = MustMake({.model = "resnet50"}, Images(1, 28, 10));
  EXPECT_EQ(Shapes(mnist->NamedParameters()).at("conv1.weight"),
            (std::vector<int64_t>{64, 1, 3, 3}));
}

TEST(ResNetTest, ForwardShapesAndInitAreDeterministic) {
  std::unique_ptr<Model> a = MustMake({.model = "resnet18", .seed = 4}, Images(3, 32, 10));
  std::unique_ptr<Model> b = MustMake({.model = "resnet18", .seed = 4}, Images(3, 32, 10));
  std::unique_ptr<Model> c = MustMake({.model = "resnet18", .seed = 5}, Images(3, 32, 10));
  const auto pa = a->Parameters();
  const auto pb = b->Parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(pa[i].equal(pb[i])) << i;
  EXPECT_FALSE(pa[0].equal(c->Parameters()[0]));

  const Batch batch = ImageBatch(3, 3, 32, 10, 1);
  const StepOutput out = a->Forward(batch);
  EXPECT_EQ(out.loss.dim(), 0);
  EXPECT_EQ(out.count, 3);
  EXPECT_GE(out.correct.item<int64_t>(), 0);
  EXPECT_LE(out.correct.item<int64_t>(), 3);
  // Large input through the ImageNet stem.
  std::unique_ptr<Model> big = MustMake({.model = "resnet50"}, Images(3, 80, 7));
  const StepOutput big_out = big->Forward(ImageBatch(2, 3, 80, 7, 2));
  EXPECT_TRUE(std::isfinite(big_out.loss.item<double>()));
  // Eval mode leaves BatchNorm statistics alone.
  a->Train(false);
  const at::Tensor before = a->NamedBuffers()[0].second.clone();
  a->Forward(batch);
  EXPECT_TRUE(a->NamedBuffers()[0].second.equal(before));
}

TEST(ResNetTest, Resnet18AndResnet50LearnATinyBatch) {
  // 16x16 inputs (CIFAR stem) keep this quick on a CPU. Adam: plain SGD with momentum is
  // erratic on a ResNet-50 without zero-initialised residual BatchNorms (in PyTorch too).
  for (const char* name : {"resnet18", "resnet50"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<Model> m = MustMake({.model = name}, Images(3, 16, 10));
    const Batch batch = ImageBatch(8, 3, 16, 10, 3);
    torch::optim::Adam opt(m->Parameters(), torch::optim::AdamOptions(1e-3));
    const std::vector<double> losses = Overfit(*m, batch, opt, 5);
    EXPECT_LT(losses.back(), losses.front() * 0.5) << losses.front() << " -> " << losses.back();
  }
}

TEST(GptTest, ShapesNamesAndCausality) {
  const ModelOptions o{.model = "gpt",
                       .gpt_layers = 2,
                       .gpt_heads = 2,
                       .gpt_width = 32,
                       .vocab_size = 64,
                       .context_length = 16};
  std::unique_ptr<Model> m = MustMake(o, Tokens(16, 64));
  const auto shapes = Shapes(m->NamedParameters());
  EXPECT_EQ(shapes.at("transformer.wte.weight"), (std::vector<int64_t>{64, 32}));
  EXPECT_EQ(shapes.at("transformer.wpe.weight"), (std::vector<int64_t>{16, 32}));
  EXPECT_EQ(shapes.at("transformer.h.1.attn.c_attn.weight"), (std::vector<int64_t>{96, 32}));
  EXPECT_EQ(shapes.at("transformer.h.0.mlp.c_fc.weight"), (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(shapes.at("transformer.ln_f.bias"), (std::vector<int64_t>{32}));
  EXPECT_THAT(shapes, Not(Contains(Key("lm_head.weight"))));  // Tied to wte.
  EXPECT_EQ(m->NamedParameters().front().first, "transformer.wte.weight");
  // Seeded init: the same weights for the same seed (every rank), others for another.
  std::unique_ptr<Model> same = MustMake(o, Tokens(16, 64));
  ModelOptions other_seed = o;
  other_seed.seed = 2;
  std::unique_ptr<Model> other = MustMake(other_seed, Tokens(16, 64));
  for (size_t i = 0; i < m->Parameters().size(); ++i) {
    EXPECT_TRUE(m->Parameters()[i].equal(same->Parameters()[i])) << i;
  }
  EXPECT_FALSE(m->Parameters()[0].equal(other->Parameters()[0]));
  // nanoGPT's count for these sizes (embeddings counted once).
  const int64_t per_block =
      2 * 2 * 32 + (32 * 96 + 96) + (32 * 32 + 32) + (32 * 128 + 128) + (128 * 32 + 32);
  EXPECT_EQ(CountParameters(*m), 64 * 32 + 16 * 32 + 2 * per_block + 2 * 32);

  at::Generator gen = at::detail::createCPUGenerator(1);
  const at::Tensor tokens = at::randint(64, {2, 10}, gen);
  const Batch batch{tokens, tokens.roll(-1, 1)};
  const StepOutput out = m->Forward(batch);
  EXPECT_EQ(out.count, 20);
  EXPECT_NEAR(out.loss.item<double>(), std::log(64.0), 0.5);  // Near-uniform at init.
}

TEST(GptTest, AttentionIsCausal) {
  Gpt gpt(GptOptions{.vocab_size = 50, .context_length = 12, .layers = 2, .heads = 4, .width = 32},
          /*seed=*/3);
  at::Generator gen = at::detail::createCPUGenerator(2);
  const at::Tensor tokens = at::randint(50, {2, 12}, gen);
  at::Tensor changed = tokens.clone();
  changed.select(1, 7).add_(1).remainder_(50);
  at::NoGradGuard no_grad;
  const at::Tensor a = gpt->forward(tokens);
  const at::Tensor b = gpt->forward(changed);
  EXPECT_EQ(a.sizes().vec(), (std::vector<int64_t>{2, 12, 50}));
  // Positions before the changed token see the same logits; it and later ones do not.
  EXPECT_TRUE(a.slice(1, 0, 7).equal(b.slice(1, 0, 7)));
  EXPECT_FALSE(at::allclose(a.slice(1, 7), b.slice(1, 7)));
  // Shorter sequences than the context are fine; longer ones are refused.
  EXPECT_EQ(gpt->forward(tokens.slice(1, 0, 5)).size(1), 5);
  EXPECT_THROW(gpt->forward(at::zeros({1, 13}, at::kLong)), c10::Error);
}

TEST(GptTest, LearnsShiftedSequences) {
  absl::StatusOr<std::unique_ptr<Dataset>> data = OpenDataset({.dataset = "synthetic",
                                                               .context_length = 16,
                                                               .synthetic_samples = 64,
                                                               .vocab_size = 64,
                                                               .synthetic_tokens = true},
                                                              Split::kTrain);
  ASSERT_OK(data);
  std::unique_ptr<Model> m = MustMake({.model = "gpt",
                                       .gpt_layers = 2,
                                       .gpt_heads = 2,
                                       .gpt_width = 64,
                                       .vocab_size = 64,
                                       .context_length = 16},
                                      (*data)->info());
  std::vector<int64_t> indices(16);
  std::iota(indices.begin(), indices.end(), 0);
  absl::StatusOr<Batch> batch = (*data)->Get(indices, 0);
  ASSERT_OK(batch);
  torch::optim::Adam opt(m->Parameters(), torch::optim::AdamOptions(3e-3));
  const std::vector<double> losses = Overfit(*m, *batch, opt, 40);
  EXPECT_LT(losses.back(), losses.front() - 1.0) << losses.front() << " -> " << losses.back();
}

TEST(MakeModelTest, RejectsMismatchesWithClearStatuses) {
  EXPECT_THAT(MakeModel({.model = "gpt"}, Images(3, 32, 10)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("model"), HasSubstr("classification dataset"))));
  EXPECT_THAT(MakeModel({.model = "resnet18"}, Tokens(8, 100)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("language-model")));
  EXPECT_THAT(MakeModel({.model = "vgg"}, Images(3, 32, 10)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unknown model \"vgg\"")));
  EXPECT_THAT(MakeModel({.model = "gpt", .gpt_heads = 3, .gpt_width = 32}, Tokens(8, 100)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("gpt_width")));
  EXPECT_THAT(MakeModel({.model = "gpt", .vocab_size = 50}, Tokens(8, 100)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("vocab_size")));
  EXPECT_THAT(MakeModel({.model = "gpt", .vocab_size = 100, .context_length = 4}, Tokens(8, 100)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("context_length")));
  DatasetInfo flat = Images(3, 32, 10);
  flat.input_shape = {784};
  EXPECT_THAT(MakeModel({.model = "resnet50"}, flat),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("[C, H, W]")));
}

// Autograd nodes reachable from `loss` that backward will run, leaves' AccumulateGrad
// not counted: the recorded operations.
size_t GraphNodes(const at::Tensor& loss) {
  std::unordered_set<const torch::autograd::Node*> seen;
  std::vector<torch::autograd::Node*> todo = {loss.grad_fn().get()};
  while (!todo.empty()) {
    torch::autograd::Node* node = todo.back();
    todo.pop_back();
    if (node == nullptr || !seen.insert(node).second) continue;
    for (const torch::autograd::Edge& edge : node->next_edges())
      todo.push_back(edge.function.get());
  }
  size_t ops = 0;
  for (const torch::autograd::Node* node : seen) {
    ops += node->name().find("AccumulateGrad") == std::string::npos;
  }
  return ops;
}

// The same model with activation_checkpointing "none" and "blocks", trained side by side
// with SGD + momentum on `batch`: every step's loss, every parameter's gradient, and the
// parameters and buffers after each step are bit-identical; the checkpointed graph is
// smaller (the blocks' insides are not recorded).
void ExpectCheckpointingChangesNothing(ModelOptions o, const DatasetInfo& info,
                                       const Batch& batch) {
  o.activation_checkpointing = "none";
  std::unique_ptr<Model> plain = MustMake(o, info);
  o.activation_checkpointing = "blocks";
  std::unique_ptr<Model> ckpt = MustMake(o, info);
  ASSERT_TRUE(plain && ckpt);
  const auto sgd = torch::optim::SGDOptions(0.05).momentum(0.9);
  torch::optim::SGD plain_opt(plain->Parameters(), sgd);
  torch::optim::SGD ckpt_opt(ckpt->Parameters(), sgd);
  for (int step = 0; step < 3; ++step) {
    SCOPED_TRACE(step);
    plain_opt.zero_grad();
    ckpt_opt.zero_grad();
    const StepOutput a = plain->Forward(batch);
    const StepOutput b = ckpt->Forward(batch);
    EXPECT_TRUE(at::equal(a.loss, b.loss))
        << a.loss.item<double>() << " vs " << b.loss.item<double>();
    EXPECT_LT(GraphNodes(b.loss), GraphNodes(a.loss) / 2);
    a.loss.backward();
    b.loss.backward();
    const NamedTensors pa = plain->NamedParameters();
    const NamedTensors pb = ckpt->NamedParameters();
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      ASSERT_TRUE(pb[i].second.grad().defined()) << pb[i].first;
      EXPECT_TRUE(at::equal(pa[i].second.grad(), pb[i].second.grad())) << pa[i].first;
    }
    plain_opt.step();
    ckpt_opt.step();
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_TRUE(at::equal(pa[i].second, pb[i].second)) << pa[i].first;
    }
    const NamedTensors ba = plain->NamedBuffers();
    const NamedTensors bb = ckpt->NamedBuffers();
    ASSERT_EQ(ba.size(), bb.size());
    for (size_t i = 0; i < ba.size(); ++i) {
      EXPECT_TRUE(at::equal(ba[i].second, bb[i].second)) << ba[i].first;
    }
  }
}

TEST(ActivationCheckpointingTest, GptGradientsAndStepsAreBitIdentical) {
  const DatasetInfo info = Tokens(16, 64);
  at::Generator gen = at::detail::createCPUGenerator(11);
  const at::Tensor tokens = at::randint(64, {4, 17}, gen);
  const Batch batch{tokens.slice(1, 0, 16).contiguous(), tokens.slice(1, 1, 17).contiguous()};
  ExpectCheckpointingChangesNothing({.model = "gpt",
                                     .gpt_layers = 3,
                                     .gpt_heads = 2,
                                     .gpt_width = 32,
                                     .vocab_size = 64,
                                     .context_length = 16,
                                     .seed = 5},
                                    info, batch);
}

TEST(ActivationCheckpointingTest, Resnet18GradientsStepsAndBatchNormStatsAreBitIdentical) {
  ExpectCheckpointingChangesNothing({.model = "resnet18", .seed = 5}, Images(3, 16, 10),
                                    ImageBatch(4, 3, 16, 10, 3));
}

TEST(ActivationCheckpointingTest, ModelsWithoutBlocksAndUnknownValuesAreRejected) {
  ModelOptions mlp{.model = "mlp"};
  mlp.activation_checkpointing = "blocks";
  EXPECT_THAT(MakeModel(mlp, Images(1, 28, 10)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("activation_checkpointing"), HasSubstr("\"mlp\""))));
  ModelOptions script{.model = "torchscript", .torchscript_path = "/nonexistent.pt"};
  script.activation_checkpointing = "blocks";
  EXPECT_THAT(MakeModel(script, Images(1, 28, 10)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       AllOf(HasSubstr("activation_checkpointing"), HasSubstr("\"torchscript\""))));
  ModelOptions gpt{.model = "gpt", .vocab_size = 100};
  gpt.activation_checkpointing = "layers";
  EXPECT_THAT(MakeModel(gpt, Tokens(8, 100)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "activation_checkpointing: 'layers' is not supported; allowed: none, "
                       "blocks"));
}

TEST(MlpModelTest, FlattensImagesAndKeepsItsNames) {
  std::unique_ptr<Model> m = MustMake({.model = "mlp", .hidden = {16}}, Images(1, 28, 10));
  EXPECT_EQ(Shapes(m->NamedParameters()),
            (std::map<std::string, std::vector<int64_t>>{{"layers.0.weight", {16, 784}},
                                                         {"layers.0.bias", {16}},
                                                         {"layers.1.weight", {10, 16}},
                                                         {"layers.1.bias", {10}}}));
  EXPECT_TRUE(m->NamedBuffers().empty());
  const StepOutput out = m->Forward(ImageBatch(5, 1, 28, 10, 1));
  EXPECT_EQ(out.count, 5);
}

}  // namespace
}  // namespace baton::trainer
