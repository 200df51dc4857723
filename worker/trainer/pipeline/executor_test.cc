// The pipeline executor trains exactly what one process trains: S = 2 stages (and 3 for the
// GPT, whose middle stage has neither embedding nor head) as threads with real communicators
// (Gloo, shared memory), GPipe and 1F1B, the MLP and a small GPT; after K
// SGD steps every stage's parameters equal those of one process training the whole model on
// the same global batch. And S = 2 x D = 2: two pipelines whose stage replicas average their
// gradients over a data-parallel communicator of their own (CreatePipelineGroups).
//
// Tolerance: not bit-identical. The single process computes the batch's mean loss at once;
// the pipeline adds M micro-batch gradients, each of (micro-batch mean / M), into .grad one
// after another (and data parallelism averages replicas), so the same products are summed in
// a different order. In float32 that moves results by a few ulps per step: the comparison
// allows rtol 1e-4, atol 1e-6 after K = 3 steps (the largest observed difference is recorded
// as the test property max_abs_difference: ~1e-7), while the parameters move by more than 1e-2
// and training on one micro-batch only ends more than 1e-3 away (checked below, so the
// comparison can fail).

#include "worker/trainer/pipeline/executor.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <future>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/gloo_communicator.h"
#include "worker/trainer/comm/shm_communicator.h"
#include "worker/trainer/comm/testing/test_ranks.h"
#include "worker/trainer/pipeline/process_groups.h"
#include "worker/trainer/pipeline/schedule.h"
#include "worker/trainer/pipeline/stage_model.h"

namespace baton::trainer::pipeline {
namespace {

using ::baton::trainer::testing::CommunicatorFactory;
using ::baton::trainer::testing::MakeGloo;
using ::baton::trainer::testing::MakeRankStores;
using ::baton::trainer::testing::RunRanksWith;
using ::testing::HasSubstr;

constexpr int kSteps = 3;
constexpr double kLr = 0.5;
constexpr uint64_t kSeed = 11;

CommunicatorFactory MakeShm() {
  return [](const c10::intrusive_ptr<c10d::Store>& store, int rank, int world) {
    ShmOptions options;
    options.slot_bytes = 64 << 10;
    options.collective_timeout = absl::Seconds(30);
    options.poll_interval = absl::Milliseconds(20);
    return CreateShmCommunicator(store, rank, world, options);
  };
}

// One of the two built-in models, whole (the reference) or as a stage.
struct ModelKind {
  std::string name;
  // The whole model from kSeed, as a module and a forward.
  std::function<std::shared_ptr<torch::nn::Module>()> make;
  std::function<at::Tensor(torch::nn::Module&, const at::Tensor&)> forward;
  std::function<absl::StatusOr<std::unique_ptr<StageModel>>(std::shared_ptr<torch::nn::Module>, int,
                                                            int)>
      stage;
  LossFn loss;
  // Step k's global batch.
  std::function<std::pair<at::Tensor, at::Tensor>(int)> batch;
};

const MlpOptions kMlp{/*input_dim=*/12, /*hidden=*/{16, 8, 8}, /*num_classes=*/5};

GptOptions SmallGpt() {
  GptOptions o;
  o.vocab_size = 32;
  o.context_length = 8;
  o.layers = 4;
  o.heads = 2;
  o.width = 16;
  return o;
}

ModelKind MlpKind() {
  ModelKind k;
  k.name = "mlp";
  k.make = [] { return Mlp(kMlp, kSeed).ptr(); };
  k.forward = [](torch::nn::Module& m, const at::Tensor& x) {
    return static_cast<MlpImpl&>(m).forward(x);
  };
  k.stage = [](std::shared_ptr<torch::nn::Module> m, int s, int n) {
    return MakeMlpStage(Mlp(std::static_pointer_cast<MlpImpl>(m)), s, n);
  };
  k.loss = [](const at::Tensor& logits, const at::Tensor& targets) {
    return torch::nn::functional::cross_entropy(logits, targets);
  };
  k.batch = [](int step) {
    at::Generator gen = at::detail::createCPUGenerator(100 + step);
    at::Tensor x = at::randn({16, 12}, gen);
    at::Tensor y = at::randint(5, {16}, gen, at::kLong);
    return std::make_pair(x, y);
  };
  return k;
}

ModelKind GptKind() {
  ModelKind k;
  k.name = "gpt";
  k.make = [] { return Gpt(SmallGpt(), kSeed).ptr(); };
  k.forward = [](torch::nn::Module& m, const at::Tensor& x) {
    return static_cast<GptImpl&>(m).forward(x);
  };
  k.stage = [](std::shared_ptr<torch::nn::Module> m, int s, int n) {
    return MakeGptStage(Gpt(std::static_pointer_cast<GptImpl>(m)), s, n);
  };
  k.loss = [](const at::Tensor& logits, const at::Tensor& targets) {
    return torch::nn::functional::cross_entropy(logits.reshape({-1, logits.size(-1)}),
                                                targets.reshape({-1}));
  };
  k.batch = [](int step) {
    at::Generator gen = at::detail::createCPUGenerator(200 + step);
    at::Tensor tokens = at::randint(32, {8, 8}, gen, at::kLong);
    at::Tensor targets = at::randint(32, {8, 8}, gen, at::kLong);
    return std::make_pair(tokens, targets);
  };
  return k;
}

using Params = std::map<std::string, at::Tensor>;

// One process, the whole model, the whole batch: K SGD steps. Returns the parameters.
Params Reference(const ModelKind& kind, std::vector<double>* losses = nullptr) {
  std::shared_ptr<torch::nn::Module> model = kind.make();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(kLr));
  for (int step = 0; step < kSteps; ++step) {
    const auto [x, y] = kind.batch(step);
    sgd.zero_grad();
    at::Tensor loss = kind.loss(kind.forward(*model, x), y);
    loss.backward();
    sgd.step();
    if (losses != nullptr) losses->push_back(loss.item<double>());
  }
  Params out;
  for (const auto& item : model->named_parameters()) out[item.key()] = item.value().detach();
  return out;
}

struct StageOutcome {
  Params params;               // The parameters this stage trains, by name.
  std::vector<double> losses;  // Per step, on the last stage.
};

// Trains stage `stage` of a pipeline of pipeline.world_size() stages for K steps, on replica
// `replica` of `replicas` (its share of each global batch). Tied gradients are exchanged
// unless `skip_tied`.
StageOutcome TrainStage(const ModelKind& kind, ScheduleKind schedule, int micro_batches,
                        Communicator& pipeline, Communicator* data_parallel, int replica,
                        int replicas) {
  StageOutcome out;
  std::shared_ptr<torch::nn::Module> model = kind.make();
  absl::StatusOr<std::unique_ptr<StageModel>> stage =
      kind.stage(model, pipeline.rank(), pipeline.world_size());
  EXPECT_OK(stage.status());
  if (!stage.ok()) return out;
  absl::StatusOr<std::unique_ptr<PipelineExecutor>> executor =
      PipelineExecutor::Create(**stage, pipeline, data_parallel, schedule, micro_batches);
  EXPECT_OK(executor.status());
  if (!executor.ok()) return out;
  torch::optim::SGD sgd((*stage)->Parameters(), torch::optim::SGDOptions(kLr));
  for (int step = 0; step < kSteps; ++step) {
    auto [x, y] = kind.batch(step);
    const int64_t share = x.size(0) / replicas;
    x = x.narrow(0, replica * share, share);
    y = y.narrow(0, replica * share, share);
    sgd.zero_grad();
    absl::StatusOr<StepResult> result = (*executor)->RunStep(x, y, kind.loss);
    EXPECT_OK(result.status());
    if (!result.ok()) return out;
    sgd.step();
    out.losses.push_back(result->loss);
  }
  for (const auto& item : model->named_parameters()) {
    for (const at::Tensor& p : (*stage)->Parameters()) {
      if (p.is_same(item.value())) out.params[item.key()] = item.value().detach();
    }
  }
  return out;
}

// Every stage's parameters match the reference's; together they cover the model.
void ExpectMatchesReference(const ModelKind& kind, const std::vector<StageOutcome>& stages) {
  const Params want = Reference(kind);
  std::map<std::string, int> covered;
  double worst = 0.0;
  for (size_t s = 0; s < stages.size(); ++s) {
    for (const auto& [name, got] : stages[s].params) {
      ++covered[name];
      const at::Tensor& w = want.at(name);
      worst = std::max(worst, (got - w).abs().max().item<double>());
      EXPECT_TRUE(at::allclose(got, w, /*rtol=*/1e-4, /*atol=*/1e-6))
          << "stage " << s << " " << name << ": max difference "
          << (got - w).abs().max().item<double>();
    }
  }
  EXPECT_EQ(covered.size(), want.size());
  ::testing::Test::RecordProperty("max_abs_difference", absl::StrCat(worst));
  // The comparison can fail: the parameters moved well beyond the tolerance.
  const Params init = [&] {
    Params p;
    for (const auto& item : kind.make()->named_parameters()) p[item.key()] = item.value();
    return p;
  }();
  double moved = 0.0;
  for (const auto& [name, w] : want) {
    moved = std::max(moved, (w - init.at(name)).abs().max().item<double>());
  }
  EXPECT_GT(moved, 1e-2);
}

struct Case {
  std::string name;
  std::function<ModelKind()> kind;
  ScheduleKind schedule;
  CommunicatorFactory make;
  int stages = 2;
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

class PipelineTest : public ::testing::TestWithParam<Case> {};

TEST_P(PipelineTest, TrainsLikeOneProcess) {
  const Case& c = GetParam();
  const ModelKind kind = c.kind();
  const std::vector<StageOutcome> got =
      RunRanksWith<StageOutcome>(c.stages, c.make, [&](Communicator& comm) {
        return TrainStage(kind, c.schedule, /*micro_batches=*/4, comm, nullptr, 0, 1);
      });
  ExpectMatchesReference(kind, got);
  std::vector<double> want_losses;
  Reference(kind, &want_losses);
  const StageOutcome& last = got[c.stages - 1];
  ASSERT_EQ(last.losses.size(), want_losses.size());
  for (size_t i = 0; i < want_losses.size(); ++i) {
    EXPECT_NEAR(last.losses[i], want_losses[i], 1e-5) << "step " << i;
  }
}

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (const auto& [kind_name, kind] :
       std::vector<std::pair<std::string, std::function<ModelKind()>>>{{"Mlp", MlpKind},
                                                                       {"Gpt", GptKind}}) {
    for (ScheduleKind schedule : {ScheduleKind::kGpipe, ScheduleKind::k1F1B}) {
      const std::string s = schedule == ScheduleKind::kGpipe ? "Gpipe" : "OneFOneB";
      cases.push_back({absl::StrCat(kind_name, s, "Gloo"), kind, schedule, MakeGloo});
      cases.push_back({absl::StrCat(kind_name, s, "Shm"), kind, schedule, MakeShm()});
    }
  }
  cases.push_back({"Gpt3StagesOneFOneBGloo", GptKind, ScheduleKind::k1F1B, MakeGloo, 3});
  cases.push_back({"Gpt3StagesGpipeShm", GptKind, ScheduleKind::kGpipe, MakeShm(), 3});
  return cases;
}

INSTANTIATE_TEST_SUITE_P(Models, PipelineTest, ::testing::ValuesIn(Cases()),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// S = 2 x D = 2 on 4 threads: rank r is stage r % 2 of pipeline (replica) r / 2, with the
// pipeline's and the stage's communicators from CreatePipelineGroups (separate groups through
// prefixes of one store: the Communicator interface has no sub-communicators), over Gloo and
// over shared memory.
TEST(PipelineDataParallelTest, TwoStagesTimesTwoReplicasTrainLikeOneProcess) {
  constexpr int kStages = 2;
  constexpr int kWorld = 4;
  for (const auto& [backend, make] : std::vector<std::pair<std::string, CommunicatorFactory>>{
           {"gloo", MakeGloo}, {"shm", MakeShm()}}) {
    for (const ModelKind& kind : {MlpKind(), GptKind()}) {
      SCOPED_TRACE(absl::StrCat(backend, " ", kind.name));
      const std::vector<c10::intrusive_ptr<c10d::Store>> stores = MakeRankStores(kWorld);
      std::vector<std::future<StageOutcome>> ranks;
      for (int r = 0; r < kWorld; ++r) {
        ranks.push_back(std::async(std::launch::async, [&, r] {
          absl::StatusOr<PipelineGroups> groups =
              CreatePipelineGroups(stores[r], r, kWorld, kStages, make);
          EXPECT_OK(groups.status());
          if (!groups.ok()) return StageOutcome();
          EXPECT_EQ(groups->stage, r % kStages);
          EXPECT_EQ(groups->replica, r / kStages);
          EXPECT_EQ(groups->pipeline->rank(), r % kStages);
          EXPECT_EQ(groups->data_parallel->rank(), r / kStages);
          return TrainStage(kind, ScheduleKind::k1F1B, /*micro_batches=*/2, *groups->pipeline,
                            groups->data_parallel.get(), groups->replica, kWorld / kStages);
        }));
      }
      std::vector<StageOutcome> got;
      for (auto& f : ranks) got.push_back(f.get());
      ExpectMatchesReference(kind, got);
    }
  }
}

TEST(PipelineGroupsTest, OnePipelineHasNoDataParallelGroupAndBadShapesAreRefused) {
  const std::vector<c10::intrusive_ptr<c10d::Store>> stores = MakeRankStores(2);
  std::vector<std::future<bool>> ranks;
  for (int r = 0; r < 2; ++r) {
    ranks.push_back(std::async(std::launch::async, [&, r] {
      absl::StatusOr<PipelineGroups> groups = CreatePipelineGroups(stores[r], r, 2, 2, MakeGloo);
      return groups.ok() && groups->data_parallel == nullptr && groups->pipeline->rank() == r;
    }));
  }
  for (auto& f : ranks) EXPECT_TRUE(f.get());
  EXPECT_THAT(
      CreatePipelineGroups(stores[0], 0, 3, 2, MakeGloo),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("cannot form pipelines of 2 stages")));
  EXPECT_THAT(CreatePipelineGroups(stores[0], 4, 4, 2, MakeGloo),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 4 of 4")));
}

// What the tolerance tells apart: a pipeline that trained on the first micro-batch only is
// far from the reference.
TEST(PipelineExecutorTest, OneMicroBatchAloneIsFarFromTheReference) {
  const ModelKind kind = MlpKind();
  const Params want = Reference(kind);
  std::shared_ptr<torch::nn::Module> model = kind.make();
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(kLr));
  for (int step = 0; step < kSteps; ++step) {
    const auto [x, y] = kind.batch(step);
    sgd.zero_grad();
    kind.loss(kind.forward(*model, x.narrow(0, 0, 4)), y.narrow(0, 0, 4)).backward();
    sgd.step();
  }
  double worst = 0.0;
  for (const auto& item : model->named_parameters()) {
    worst = std::max(worst, (item.value() - want.at(item.key())).abs().max().item<double>());
  }
  EXPECT_GT(worst, 1e-3);
}

TEST(PipelineExecutorTest, RejectsWhatDoesNotFit) {
  LocalCommunicator local;
  auto stage = MakeMlpStage(Mlp(kMlp, kSeed), 0, 2);
  ASSERT_OK(stage.status());
  EXPECT_THAT(PipelineExecutor::Create(**stage, local, nullptr, ScheduleKind::kGpipe, 2),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("does not fit stage 0 of 2")));
  auto whole = MakeMlpStage(Mlp(kMlp, kSeed), 0, 1);
  ASSERT_OK(whole.status());
  EXPECT_THAT(PipelineExecutor::Create(**whole, local, nullptr, ScheduleKind::kGpipe, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("0 micro-batches")));
  auto executor = PipelineExecutor::Create(**whole, local, nullptr, ScheduleKind::k1F1B, 3);
  ASSERT_OK(executor.status());
  const auto [x, y] = MlpKind().batch(0);
  EXPECT_THAT((*executor)->RunStep(x, y, MlpKind().loss),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("a batch of 16 inputs does not split into 3")));
  // One stage: the executor is plain gradient accumulation over micro-batches.
  auto four = PipelineExecutor::Create(**whole, local, nullptr, ScheduleKind::k1F1B, 4);
  ASSERT_OK(four.status());
  absl::StatusOr<StepResult> result = (*four)->RunStep(x, y, MlpKind().loss);
  ASSERT_OK(result.status());
  Mlp reference(kMlp, kSeed);
  EXPECT_NEAR(result->loss, MlpKind().loss(reference->forward(x), y).item<double>(), 1e-6);
}

}  // namespace
}  // namespace baton::trainer::pipeline
