// Pipeline parallelism in the training loop (pipeline_session.h), end to end in one process:
// ranks are threads with real communicators (shared memory, Gloo).
//
// Equivalence: S = 2 (and S = 2 x D = 2) trains to the parameters one rank reaches with the
// same global batch, for the MLP and a small GPT, with clipping on (the global norm). Not
// bit for bit: one rank computes the batch's mean loss at once, a pipeline adds M
// micro-batch gradients (each of the micro-batch's mean / M) one after another, and with
// D = 2 the replicas' gradients are averaged: the same products summed in another order.
// In float32 that moves the parameters by a few ulps per step, so the comparison allows
// rtol 1e-4 and atol 1e-5 (MLP, SGD with momentum) or 5e-5 (GPT, AdamW: its update divides
// by sqrt(v), which magnifies rounding in small gradients; 1.7e-5 observed at 2 x 2) after
// K = 6 steps, while the parameters move by more than 1e-3 (checked, so the comparison can
// fail). The largest difference is recorded as the test property max_abs_difference.
//
// Checkpoints: a run checkpointed at S = 2 and resumed at S = 2 ends bit for bit where an
// uninterrupted S = 2 run ends; resumed on two pipelines instead of one (elastic: D changes,
// S does not) it ends within rounding of it; a checkpoint of S = 2 is refused by a run of
// S = 1 and vice versa (FAILED_PRECONDITION naming both).

#include <ATen/ATen.h>
#include <torch/csrc/jit/serialization/pickle.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/testing/test_ranks.h"
#include "worker/trainer/contract/metrics_writer.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/testing/rank_context.h"
#include "worker/trainer/testing/ticking_clock.h"
#include "worker/trainer/trainer.h"

namespace baton::trainer {
namespace {

using ::baton::trainer::testing::CommunicatorFactory;
using ::baton::trainer::testing::MakeGloo;
using ::baton::trainer::testing::MakeShm;
using ::baton::trainer::testing::RankContext;
using ::baton::trainer::testing::RunRanksWith;
using ::baton::trainer::testing::TickingClock;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr int kSteps = 6;
using Weights = std::map<std::string, at::Tensor>;

std::string TempDir() {
  const char* dir = std::getenv("TEST_TMPDIR");
  return dir != nullptr ? dir : "/tmp";
}

// A pickled Dict[str, Tensor] (final.pt).
Weights LoadWeights(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)),
                                std::istreambuf_iterator<char>());
  Weights weights;
  if (bytes.empty()) {
    ADD_FAILURE() << "cannot read " << path;
    return weights;
  }
  const c10::IValue value = torch::jit::pickle_load(bytes);
  for (const auto& item : value.toGenericDict()) {
    weights[item.key().toStringRef()] = item.value().toTensor();
  }
  return weights;
}

// Every stage's final.pt of a pipeline run into `dir`, merged (the tied wte of both the
// first and the last stage must agree bit for bit).
Weights StageWeights(const std::string& dir, int stages) {
  Weights all;
  for (int s = 0; s < stages; ++s) {
    for (auto& [name, tensor] :
         LoadWeights(absl::StrCat(dir, "/pipeline-", stages, "-stage-", s, "/final.pt"))) {
      auto [it, inserted] = all.emplace(name, tensor);
      if (!inserted) {
        EXPECT_TRUE(it->second.equal(tensor)) << name << " differs between stages";
      }
    }
  }
  return all;
}

void ExpectClose(const Weights& got, const Weights& want, double rtol, double atol) {
  ASSERT_EQ(got.size(), want.size());
  double largest = 0;
  for (const auto& [name, w] : want) {
    auto it = got.find(name);
    ASSERT_NE(it, got.end()) << name;
    largest = std::max(largest, (it->second - w).abs().max().item<double>());
    EXPECT_TRUE(at::allclose(it->second, w, rtol, atol))
        << name << ": max difference " << (it->second - w).abs().max().item<double>();
  }
  ::testing::Test::RecordProperty("max_abs_difference", absl::StrCat(largest));
}

class PipelineSessionTest : public ::testing::Test {
 protected:
  static std::unique_ptr<Dataset> Open(bool tokens) {
    DataOptions data;
    data.dataset = "synthetic";
    data.synthetic_samples = 512;
    data.synthetic_tokens = tokens;
    data.context_length = 8;
    data.vocab_size = 32;
    data.num_classes = 5;
    data.image_size = 4;
    absl::StatusOr<std::unique_ptr<Dataset>> d = OpenDataset(data, Split::kTrain);
    EXPECT_OK(d);
    return d.ok() ? std::move(*d) : nullptr;
  }

  static TrainerOptions Mlp() {
    TrainerOptions o;
    o.model.model = "mlp";
    o.model.hidden = {32, 16};
    o.batch_size = 16;
    o.optimizer.lr = 0.1;
    o.optimizer.momentum = 0.9;
    o.step.max_grad_norm = 0.5;  // Clips: the global norm over both stages matters.
    o.max_steps = kSteps;
    o.log_every = 3;
    return o;
  }

  static TrainerOptions SmallGpt() {
    TrainerOptions o;
    o.model.model = "gpt";
    o.model.gpt_layers = 2;
    o.model.gpt_heads = 2;
    o.model.gpt_width = 16;
    o.model.vocab_size = 32;
    o.model.context_length = 8;
    o.batch_size = 8;
    o.optimizer.name = "adamw";
    o.optimizer.lr = 3e-3;
    o.step.max_grad_norm = 1.0;
    o.max_steps = kSteps;
    o.log_every = 3;
    return o;
  }

  // `world` ranks (threads) over `make`; each rank's log in logs[rank].
  static std::vector<absl::StatusOr<TrainResult>> Run(const Dataset& train,
                                                      const TrainerOptions& options, int world,
                                                      const CommunicatorFactory& make,
                                                      std::vector<std::string>* logs = nullptr,
                                                      int64_t generation = 1) {
    TickingClock clock(absl::Milliseconds(1));
    std::vector<std::string> out(world);
    auto results = RunRanksWith<absl::StatusOr<TrainResult>>(world, make, [&](Communicator& comm) {
      RankContext rank(train, comm, clock, generation);
      absl::StatusOr<TrainResult> result = Trainer(options, rank.context).Run();
      out[comm.rank()] = rank.log.str();
      return result;
    });
    if (logs != nullptr) *logs = out;
    return results;
  }

  // One rank (LocalCommunicator) with final.pt in `dir`.
  static Weights Reference(const Dataset& train, TrainerOptions options, const std::string& dir,
                           TrainResult* result = nullptr) {
    options.checkpoint_dir = dir;
    options.pipeline_stages = 1;
    options.pipeline_micro_batches = 1;
    LocalCommunicator comm;
    TickingClock clock(absl::Milliseconds(1));
    MetricsWriter metrics;
    std::ostringstream log;
    TrainerContext context;
    context.train = &train;
    context.comm = &comm;
    context.metrics = &metrics;
    context.clock = &clock;
    context.log = &log;
    absl::StatusOr<TrainResult> r = Trainer(options, context).Run();
    EXPECT_OK(r);
    if (result != nullptr && r.ok()) *result = *r;
    return LoadWeights(dir + "/final.pt");
  }

  // The parameters moved: the comparison can fail.
  static void ExpectMoved(const Weights& trained, const Weights& initial) {
    double moved = 0;
    for (const auto& [name, w] : initial) {
      moved = std::max(moved, (trained.at(name) - w).abs().max().item<double>());
    }
    EXPECT_GT(moved, 1e-3);
  }
};

struct Case {
  std::string name;
  bool gpt;
  int replicas;
  std::string schedule;
  bool shm;
};

class PipelineEquivalenceTest : public PipelineSessionTest,
                                public ::testing::WithParamInterface<Case> {};

TEST_P(PipelineEquivalenceTest, MatchesOneRankWithTheSameGlobalBatch) {
  const Case& c = GetParam();
  std::unique_ptr<Dataset> train = Open(c.gpt);
  ASSERT_NE(train, nullptr);
  TrainerOptions options = c.gpt ? SmallGpt() : Mlp();
  options.global_batch = options.batch_size * c.replicas;
  const std::string base = absl::StrCat(TempDir(), "/equiv-", c.name);
  std::filesystem::remove_all(base);

  TrainerOptions one = options;
  one.batch_size = options.global_batch;
  TrainResult want_result;
  const Weights want = Reference(*train, one, base + "/one", &want_result);
  TrainerOptions zero_steps = one;
  zero_steps.max_steps = 1;
  zero_steps.optimizer.lr = 1e-30;  // final.pt holds the initial weights (to the last bit).
  const Weights initial = Reference(*train, zero_steps, base + "/initial");

  TrainerOptions pipe = options;
  pipe.pipeline_stages = 2;
  pipe.pipeline_micro_batches = 4;
  pipe.pipeline_schedule = c.schedule;
  pipe.checkpoint_dir = base + "/pipe";
  std::vector<std::string> logs;
  const auto results =
      Run(*train, pipe, 2 * c.replicas, c.shm ? MakeShm(absl::Seconds(60)) : MakeGloo, &logs);
  for (const auto& r : results) {
    ASSERT_OK(r);
    EXPECT_EQ(r->steps, kSteps);
    // Every rank reports the last stages' loss: rank 0 (a first stage) too.
    EXPECT_NEAR(r->loss, want_result.loss, 1e-4 * std::abs(want_result.loss) + 1e-6);
  }
  EXPECT_THAT(logs[0], HasSubstr("pipeline stage 0 of 2"));
  const Weights got = StageWeights(pipe.checkpoint_dir, 2);
  // AdamW (the GPT) divides each update by sqrt(v): rounding differences in small
  // gradients show at the scale of the lr (3e-3), so its atol is 5e-5 (< 2% of one step).
  ExpectClose(got, want, 1e-4, c.gpt ? 5e-5 : 1e-5);
  ExpectMoved(want, initial);
  // Each stage holds only its part of the model.
  const Weights stage0 = LoadWeights(pipe.checkpoint_dir + "/pipeline-2-stage-0/final.pt");
  EXPECT_LT(stage0.size(), want.size());
}

INSTANTIATE_TEST_SUITE_P(Models, PipelineEquivalenceTest,
                         ::testing::Values(Case{"mlp_shm_1f1b", false, 1, "1f1b", true},
                                           Case{"mlp_gloo_gpipe", false, 1, "gpipe", false},
                                           Case{"gpt_shm_1f1b", true, 1, "1f1b", true},
                                           Case{"gpt_gloo_gpipe", true, 1, "gpipe", false},
                                           Case{"mlp_shm_2x2", false, 2, "1f1b", true},
                                           Case{"gpt_gloo_2x2", true, 2, "1f1b", false}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return info.param.name;
                         });

// Checkpointed after 3 of 6 steps and resumed: bit for bit the uninterrupted run.
TEST_F(PipelineSessionTest, ResumesFromAStageCheckpointExactly) {
  std::unique_ptr<Dataset> train = Open(/*tokens=*/true);
  ASSERT_NE(train, nullptr);
  TrainerOptions options = SmallGpt();
  options.pipeline_stages = 2;
  options.pipeline_micro_batches = 2;
  options.checkpoint_every = 3;
  const std::string base = TempDir() + "/resume";
  std::filesystem::remove_all(base);
  const CommunicatorFactory shm = MakeShm(absl::Seconds(60));

  TrainerOptions straight = options;
  straight.checkpoint_dir = base + "/straight";
  for (const auto& r : Run(*train, straight, 2, shm)) ASSERT_OK(r);

  TrainerOptions first = options;
  first.checkpoint_dir = base + "/resumed";
  first.max_steps = 3;
  for (const auto& r : Run(*train, first, 2, shm, nullptr, /*generation=*/1)) ASSERT_OK(r);
  TrainerOptions second = options;
  second.checkpoint_dir = base + "/resumed";
  const auto resumed = Run(*train, second, 2, shm, nullptr, /*generation=*/2);
  for (const auto& r : resumed) {
    ASSERT_OK(r);
    EXPECT_EQ(r->steps, kSteps);
    EXPECT_THAT(r->restored_from, HasSubstr("ckpt-00000003"));
  }
  const Weights want = StageWeights(base + "/straight", 2);
  const Weights got = StageWeights(base + "/resumed", 2);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [name, w] : want) EXPECT_TRUE(got.at(name).equal(w)) << name;
}

// Elastic: a checkpoint of one pipeline (S = 2, D = 1) resumes on two (S = 2, D = 2, 4
// ranks) with the same global batch, and ends where the unresized run ends (within the
// rounding of the replicas' average, as in MatchesOneRankWithTheSameGlobalBatch).
TEST_F(PipelineSessionTest, ResumesOnMorePipelines) {
  std::unique_ptr<Dataset> train = Open(/*tokens=*/false);
  ASSERT_NE(train, nullptr);
  TrainerOptions options = Mlp();
  options.global_batch = 16;
  options.pipeline_stages = 2;
  options.pipeline_micro_batches = 2;
  options.checkpoint_every = 3;
  const std::string base = TempDir() + "/resize";
  std::filesystem::remove_all(base);
  const CommunicatorFactory shm = MakeShm(absl::Seconds(60));

  TrainerOptions straight = options;
  straight.checkpoint_dir = base + "/straight";
  for (const auto& r : Run(*train, straight, 2, shm)) ASSERT_OK(r);

  TrainerOptions resized = options;
  resized.checkpoint_dir = base + "/resized";
  resized.max_steps = 3;
  for (const auto& r : Run(*train, resized, 2, shm, nullptr, /*generation=*/1)) ASSERT_OK(r);
  resized.max_steps = kSteps;
  for (const auto& r : Run(*train, resized, 4, shm, nullptr, /*generation=*/2)) {
    ASSERT_OK(r);
    EXPECT_EQ(r->steps, kSteps);
    EXPECT_THAT(r->restored_from, HasSubstr("ckpt-00000003"));
  }
  ExpectClose(StageWeights(base + "/resized", 2), StageWeights(base + "/straight", 2), 1e-4, 1e-5);
}

// A checkpoint of 2 stages does not restore into 1, nor one of 1 into 2.
TEST_F(PipelineSessionTest, RefusesACheckpointOfAnotherNumberOfStages) {
  std::unique_ptr<Dataset> train = Open(/*tokens=*/false);
  ASSERT_NE(train, nullptr);
  TrainerOptions options = Mlp();
  options.max_steps = 2;
  options.checkpoint_dir = TempDir() + "/stages-2";
  std::filesystem::remove_all(options.checkpoint_dir);
  options.pipeline_stages = 2;
  options.pipeline_micro_batches = 2;
  for (const auto& r : Run(*train, options, 2, MakeGloo)) ASSERT_OK(r);

  TrainerOptions one = options;
  one.pipeline_stages = 1;
  one.pipeline_micro_batches = 1;
  for (const auto& r : Run(*train, one, 1, MakeGloo)) {
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition,
                            AllOf(HasSubstr("pipeline stages 2"),
                                  HasSubstr("this run has pipeline stages 1 (no pipeline)"))));
  }

  one.checkpoint_dir = TempDir() + "/stages-1";
  std::filesystem::remove_all(one.checkpoint_dir);
  for (const auto& r : Run(*train, one, 1, MakeGloo)) ASSERT_OK(r);
  TrainerOptions two = options;
  two.checkpoint_dir = one.checkpoint_dir;
  for (const auto& r : Run(*train, two, 2, MakeGloo)) {
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition,
                            AllOf(HasSubstr("pipeline stages 1 (no pipeline)"),
                                  HasSubstr("this run has pipeline stages 2"))));
  }
}

// What the pipeline loop cannot do is refused before anything runs, naming the field.
TEST_F(PipelineSessionTest, RefusesUnsupportedSettings) {
  std::unique_ptr<Dataset> train = Open(/*tokens=*/false);
  ASSERT_NE(train, nullptr);
  TrainerOptions options = Mlp();
  options.pipeline_stages = 2;
  options.pipeline_micro_batches = 2;
  TrainerOptions fp16 = options;
  fp16.step.precision = Precision::kFp16;
  for (const auto& r : Run(*train, fp16, 2, MakeGloo)) {
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument,
                            HasSubstr("--precision: 'fp16' is not supported with pipeline")));
  }
  TrainerOptions three = options;  // 3 ranks cannot hold pipelines of 2 stages.
  for (const auto& r : Run(*train, three, 3, MakeGloo)) {
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument,
                            HasSubstr("--pipeline_stages: 2 stages do not divide the world of 3")));
  }
}

}  // namespace
}  // namespace baton::trainer
