#include "worker/trainer/zero/zero_optimizer.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/serialize/archive.h>

#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/testing/test_ranks.h"
#include "worker/trainer/models/mlp.h"
#include "worker/trainer/optim/optimizer.h"
#include "worker/trainer/step/gradient_reducer.h"

namespace baton::trainer {
namespace {

using ::baton::trainer::testing::CommunicatorFactory;
using ::baton::trainer::testing::MakeGloo;
using ::baton::trainer::testing::MakeShm;
using ::baton::trainer::testing::RunRanks;
using ::baton::trainer::testing::RunRanksWith;

// Parameters of 20*16 + 16 + 16*7 + 7 + 7*5 + 5 = 495 elements: not a multiple of the
// shard alignment, so the last shards hold padding and parameters straddle shards.
const MlpOptions kMlp{/*input_dim=*/20, /*hidden=*/{16, 7}, /*num_classes=*/5};
constexpr int64_t kGlobalBatch = 12;  // Divides over 2 and 3 ranks.
// Gradient buckets of at most 512 bytes: {5, 35, 7}, {112, 16}, {320} elements, so stage 2
// reduce-scatters three segments, two of which have padding.
constexpr double kBucketCapMb = 512.0 / (1024 * 1024);

struct Data {
  at::Tensor inputs;
  at::Tensor targets;
};

const Data& TheData() {
  static const Data* data = [] {
    at::Generator gen = at::detail::createCPUGenerator(/*seed_in=*/7);
    return new Data{at::randn({kGlobalBatch * 64, kMlp.input_dim}, gen, at::kFloat),
                    at::randint(kMlp.num_classes, {kGlobalBatch * 64}, gen, at::kLong)};
  }();
  return *data;
}

OptimizerOptions Sgd() {
  OptimizerOptions o;
  o.name = "sgd";
  o.lr = 0.05;
  o.momentum = 0.9;
  o.nesterov = true;
  o.weight_decay = 1e-3;
  return o;
}

OptimizerOptions AdamW() {
  OptimizerOptions o;
  o.name = "adamw";
  o.lr = 1e-2;
  o.weight_decay = 0.05;
  return o;
}

// A part of a training run on one rank.
struct Leg {
  int stage = 0;
  OptimizerOptions optimizer;
  int first_step = 0;
  int steps = 50;
  std::vector<at::Tensor> weights;  // Start from these; empty: the seeded model's.
  std::string optimizer_bytes;      // Restore the reference optimizer from these.
  bool save = false;                // Return the optimizer as a checkpoint would save it.
};

struct LegResult {
  std::vector<at::Tensor> weights;
  bool grads_left = false;      // Some param.grad() was defined after a step's reduction.
  std::string optimizer_bytes;  // When saved.
  int64_t exported_numel = 0;   // Optimizer state elements the export left on this rank.
  int64_t state_numel = 0;
  int64_t shard_numel = 0;
  int64_t total_numel = 0;
};

// Trains the leg's steps on this rank's rows of each step's global batch, with a changing
// lr, the gradients averaged (stage 2: reduce-scattered) by a GradientReducer.
LegResult RunLeg(Communicator& comm, const Leg& leg) {
  LegResult result;
  Mlp model(kMlp, /*seed=*/3);
  std::vector<at::Tensor> params = model->parameters();
  if (!leg.weights.empty()) {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < params.size(); ++i) params[i].copy_(leg.weights[i]);
  }
  absl::StatusOr<std::unique_ptr<torch::optim::Optimizer>> reference =
      MakeOptimizer(params, leg.optimizer);
  EXPECT_OK(reference);
  if (!reference.ok()) return result;
  if (!leg.optimizer_bytes.empty()) {
    torch::serialize::InputArchive archive;
    archive.load_from(leg.optimizer_bytes.data(), leg.optimizer_bytes.size());
    (*reference)->load(archive);
  }
  std::unique_ptr<ZeroOptimizer> zero;
  GradientReducerOptions reducer_options;
  reducer_options.bucket_cap_mb = kBucketCapMb;
  // As TrainStep does: ZeRO owns where the gradients live.
  reducer_options.gradient_as_bucket_view = leg.stage == 0;
  absl::StatusOr<std::unique_ptr<GradientReducer>> reducer =
      GradientReducer::Create(params, comm, reducer_options);
  EXPECT_OK(reducer);
  if (!reducer.ok()) return result;
  if (leg.stage >= 1) {
    ZeroOptions options;
    options.stage = leg.stage;
    if (leg.stage == 2) options.segments = GradientBuckets(params, kBucketCapMb);
    absl::StatusOr<std::unique_ptr<ZeroOptimizer>> made =
        ZeroOptimizer::Create(params, leg.optimizer, **reference, comm, options);
    EXPECT_OK(made);
    if (!made.ok()) return result;
    zero = *std::move(made);
    if (leg.stage == 2) {
      EXPECT_OK((*reducer)->ReduceScatterInto(zero->GradientShards()));
    }
    EXPECT_OK(zero->ImportState());
    EXPECT_EQ(OptimizerStateNumel(**reference), 0);
    result.shard_numel = zero->shard_numel();
    result.total_numel = zero->total_numel();
  }
  const int64_t rows = kGlobalBatch / comm.world_size();
  for (int s = leg.first_step; s < leg.first_step + leg.steps; ++s) {
    SetLearningRate(**reference, leg.optimizer.lr * (1.0 - 0.01 * s));
    (*reference)->zero_grad();
    const int64_t base = s * kGlobalBatch + comm.rank() * rows;
    at::Tensor loss =
        torch::nn::functional::cross_entropy(model->forward(TheData().inputs.narrow(0, base, rows)),
                                             TheData().targets.narrow(0, base, rows));
    (*reducer)->BeginBackward(/*sync=*/true);
    loss.backward();
    EXPECT_OK((*reducer)->FinishBackward());
    for (const at::Tensor& p : params) result.grads_left |= p.grad().defined();
    if (zero != nullptr) {
      EXPECT_OK(zero->Step());
    } else {
      (*reference)->step();
    }
  }
  result.state_numel = zero != nullptr ? zero->StateNumel() : OptimizerStateNumel(**reference);
  if (leg.save) {
    if (zero != nullptr) {
      // Kept on every rank, as for snapshots (a checkpoint keeps it on rank 0 only).
      EXPECT_OK(zero->ExportState(/*keep=*/true));
    }
    result.exported_numel = OptimizerStateNumel(**reference);
    {
      torch::serialize::OutputArchive archive;
      (*reference)->save(archive);
      std::ostringstream out;
      archive.save_to(out);
      result.optimizer_bytes = std::move(out).str();
    }
    if (zero != nullptr) zero->ClearExportedState();
  }
  for (const at::Tensor& p : params) result.weights.push_back(p.detach().clone());
  return result;
}

std::vector<LegResult> RunWorld(int world, const Leg& leg,
                                const CommunicatorFactory& make = MakeGloo) {
  return RunRanksWith<LegResult>(world, make,
                                 [&leg](Communicator& comm) { return RunLeg(comm, leg); });
}

void ExpectSameBits(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(at::equal(got[i], want[i])) << "parameter " << i << ": max difference "
                                            << (got[i] - want[i]).abs().max().item<double>();
  }
}

void ExpectClose(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want,
                 double rtol, double atol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_TRUE(at::allclose(got[i], want[i], rtol, atol))
        << "parameter " << i << ": max difference "
        << (got[i] - want[i]).abs().max().item<double>();
  }
}

// Shared memory sums every element over the ranks in rank order, in an all-reduce and a
// reduce-scatter alike.
CommunicatorFactory Shm() { return MakeShm(absl::Seconds(30)); }

struct Case {
  int world;
  bool adamw;
};

class ZeroStage1Test : public ::testing::TestWithParam<Case> {};

// 50 steps of stage 1 give the bits of 50 steps of stage 0, on every rank, with 1/N of the
// optimizer state per rank.
TEST_P(ZeroStage1Test, MatchesStageZeroBitForBit) {
  const Case c = GetParam();
  Leg leg;
  leg.optimizer = c.adamw ? AdamW() : Sgd();
  const std::vector<LegResult> stage0 = RunWorld(c.world, leg);
  leg.stage = 1;
  const std::vector<LegResult> stage1 = RunWorld(c.world, leg);
  const int64_t fields = c.adamw ? 2 : 1;  // Adam's two moments; SGD's momentum.
  for (int r = 0; r < c.world; ++r) {
    SCOPED_TRACE(r);
    ExpectSameBits(stage1[r].weights, stage0[r].weights);
    EXPECT_EQ(stage0[r].state_numel, fields * stage1[r].total_numel);
    EXPECT_EQ(stage1[r].state_numel, fields * stage1[r].shard_numel);
    // The shard is 1/N of the parameters, rounded up to the alignment.
    EXPECT_LE(stage1[r].shard_numel * c.world,
              stage1[r].total_numel + c.world * ZeroOptimizer::kAlign);
  }
  // And the training moved the weights at all.
  Mlp fresh(kMlp, /*seed=*/3);
  EXPECT_FALSE(at::equal(stage1[0].weights[0], fresh->parameters()[0]));
}

// Stage 2: 50 steps with reduce-scattered gradient buckets, against stage 0 on the same
// backend. No rank holds a full gradient after a step's reduction; state and gradient are
// 1/N per rank.
//   Shared memory: the same bits (every sum is taken in rank order either way).
//   Gloo: the same bits at world 2 (a sum of two is commutative). At world 3 within
//   rounding: LibTorch 1.13's Gloo has no reduce-scatter, so it is an all-reduce of the
//   PADDED bucket, and a ring all-reduce's order of additions for an element depends on
//   which of the ring's chunks it falls in, i.e. on the buffer's length; after 50 steps the
//   parameters differ by a few float32 ulps (3e-8 seen; bound 1e-6).
TEST_P(ZeroStage1Test, StageTwoMatchesStageZero) {
  const Case c = GetParam();
  for (const bool shm : {false, true}) {
    SCOPED_TRACE(shm ? "shm" : "gloo");
    const CommunicatorFactory make = shm ? Shm() : MakeGloo;
    Leg leg;
    leg.optimizer = c.adamw ? AdamW() : Sgd();
    const std::vector<LegResult> stage0 = RunWorld(c.world, leg, make);
    leg.stage = 2;
    const std::vector<LegResult> stage2 = RunWorld(c.world, leg, make);
    const int64_t fields = c.adamw ? 2 : 1;
    for (int r = 0; r < c.world; ++r) {
      SCOPED_TRACE(r);
      if (shm || c.world == 2) {
        ExpectSameBits(stage2[r].weights, stage0[r].weights);
      } else {
        ExpectClose(stage2[r].weights, stage0[r].weights, /*rtol=*/1e-5, /*atol=*/1e-6);
      }
      EXPECT_TRUE(stage0[r].grads_left);
      EXPECT_FALSE(stage2[r].grads_left);
      EXPECT_EQ(stage2[r].state_numel, fields * stage2[r].shard_numel);
      // Three segments, each padded to at most the world size times the alignment.
      EXPECT_LE(stage2[r].shard_numel * c.world,
                stage2[r].total_numel + 3 * c.world * ZeroOptimizer::kAlign);
    }
  }
}

// A stage-1 (and stage-2) checkpoint taken at world 2 is a stage-0 checkpoint (the export
// kept on every rank, as for snapshots, and any rank's the same): restored at world 3 with
// stage 1 or 2 (re-cut shards) or stage 0, training continues with the bits of a stage-0
// run saved and restored the same way (over shared memory, whose sums do not depend on the
// stage: see StageTwoMatchesStageZero).
TEST_P(ZeroStage1Test, CheckpointRestoresAtAnotherWorldSize) {
  const Case c = GetParam();
  const int other = c.world == 2 ? 3 : 2;
  Leg first;
  first.optimizer = c.adamw ? AdamW() : Sgd();
  first.steps = 20;
  first.save = true;
  const std::vector<LegResult> saved0 = RunWorld(c.world, first, Shm());
  first.stage = 1;
  const std::vector<LegResult> saved1 = RunWorld(c.world, first, Shm());
  ExpectSameBits(saved1[0].weights, saved0[0].weights);
  EXPECT_EQ(saved1[0].optimizer_bytes.empty(), false);
  // Every rank that keeps the export holds the whole state, as stage 0 does.
  for (int r = 0; r < c.world; ++r) {
    EXPECT_EQ(saved1[r].exported_numel, saved0[r].exported_numel);
    EXPECT_GT(saved1[r].exported_numel, saved1[r].state_numel);
  }
  first.stage = 2;
  const std::vector<LegResult> saved2 = RunWorld(c.world, first, Shm());
  ExpectSameBits(saved2[0].weights, saved0[0].weights);

  Leg second;
  second.optimizer = first.optimizer;
  second.first_step = 20;
  second.steps = 30;
  second.weights = saved0[0].weights;
  second.optimizer_bytes = saved0[0].optimizer_bytes;
  const std::vector<LegResult> want = RunWorld(other, second, Shm());
  for (int stage : {0, 1, 2}) {
    SCOPED_TRACE(stage);
    second.stage = stage;
    // Any rank's export restores the same (a snapshot comes from whichever writer has it).
    for (const LegResult* saved : {&saved1[0], &saved2[0], &saved1[c.world - 1]}) {
      second.weights = saved->weights;
      second.optimizer_bytes = saved->optimizer_bytes;
      const std::vector<LegResult> got = RunWorld(other, second, Shm());
      for (int r = 0; r < other; ++r) ExpectSameBits(got[r].weights, want[r].weights);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldsAndOptimizers, ZeroStage1Test,
                         ::testing::Values(Case{2, false}, Case{2, true}, Case{3, false},
                                           Case{3, true}),
                         [](const ::testing::TestParamInfo<Case>& info) {
                           return absl::StrCat("World", info.param.world,
                                               info.param.adamw ? "AdamW" : "SgdMomentum");
                         });

// Before any step there is no state to export, and importing none leaves a fresh optimizer.
TEST(ZeroOptimizerTest, NoStateBeforeTheFirstStep) {
  RunRanks<int>(2, [](Communicator& comm) {
    Mlp model(kMlp, /*seed=*/3);
    auto reference = MakeOptimizer(model->parameters(), AdamW());
    EXPECT_OK(reference);
    auto zero = ZeroOptimizer::Create(model->parameters(), AdamW(), **reference, comm);
    EXPECT_OK(zero);
    EXPECT_OK((*zero)->ExportState(/*keep=*/true));
    EXPECT_EQ(OptimizerStateNumel(**reference), 0);
    EXPECT_OK((*zero)->ImportState());
    EXPECT_EQ((*zero)->StateNumel(), 0);
    return 0;
  });
}

// A restored optimizer with state for only some parameters cannot be cut into shards.
TEST(ZeroOptimizerTest, ImportRejectsStateForSomeParametersOnly) {
  RunRanks<int>(2, [](Communicator& comm) {
    std::vector<at::Tensor> params = {at::ones({40}).set_requires_grad(true),
                                      at::ones({24}).set_requires_grad(true)};
    auto reference = MakeOptimizer(params, Sgd());
    EXPECT_OK(reference);
    params[0].mutable_grad() = at::ones({40});  // params[1] has no gradient: no state.
    (*reference)->step();
    auto zero = ZeroOptimizer::Create(params, Sgd(), **reference, comm);
    EXPECT_OK(zero);
    EXPECT_THAT((*zero)->ImportState(),
                StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::HasSubstr("1 of 2")));
    return 0;
  });
}

// Stage 1 reads its gradient shard from the flat gradient buffer the parameters' gradients
// are views into: a gradient replaced by another tensor would be ignored silently, so Step
// refuses it. Existing gradients keep their values when they become views.
TEST(ZeroOptimizerTest, StageOneRefusesAReplacedGradient) {
  RunRanks<int>(2, [](Communicator& comm) {
    std::vector<at::Tensor> params = {at::ones({40}).set_requires_grad(true),
                                      at::ones({24}).set_requires_grad(true)};
    params[0].mutable_grad() = at::full({40}, 3.0);
    auto reference = MakeOptimizer(params, Sgd());
    EXPECT_OK(reference);
    auto zero = ZeroOptimizer::Create(params, Sgd(), **reference, comm);
    EXPECT_OK(zero);
    EXPECT_TRUE(at::equal(params[0].grad(), at::full({40}, 3.0)));
    EXPECT_TRUE(at::equal(params[1].grad(), at::zeros({24})));
    EXPECT_OK((*zero)->Step());
    params[1].mutable_grad() = at::ones({24});
    EXPECT_THAT((*zero)->Step(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                          ::testing::HasSubstr("gradient of parameter 1")));
    return 0;
  });
}

TEST(ZeroOptimizerTest, RejectsMixedDtypes) {
  RunRanks<int>(1, [](Communicator& comm) {
    std::vector<at::Tensor> params = {at::zeros({4}).set_requires_grad(true),
                                      at::zeros({4}, at::kDouble).set_requires_grad(true)};
    auto reference = MakeOptimizer({params[0]}, Sgd());
    EXPECT_OK(reference);
    EXPECT_THAT(ZeroOptimizer::Create(params, Sgd(), **reference, comm),
                StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("dtype")));
    return 0;
  });
}

}  // namespace
}  // namespace baton::trainer
