#include "worker/trainer/step/train_step.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <cmath>
#include <functional>
#include <memory>
#include <vector>

#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/testing/test_ranks.h"
#include "worker/trainer/models/mlp.h"
#include "worker/trainer/optim/optimizer.h"
#include "worker/trainer/zero/zero_optimizer.h"

namespace baton::trainer {
namespace {

using ::baton::trainer::testing::RunRanks;

const MlpOptions kMlp{/*input_dim=*/20, /*hidden=*/{16, 8}, /*num_classes=*/5};

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).norm().item<double>() / want.norm().item<double>();
}

struct Data {
  at::Tensor inputs;   // [n, 20]
  at::Tensor targets;  // [n]
};

Data MakeData(int64_t n, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return {at::randn({n, kMlp.input_dim}, gen, at::kFloat),
          at::randint(kMlp.num_classes, {n}, gen, at::kLong)};
}

// What one rank ends with after some steps.
struct RankState {
  std::vector<at::Tensor> grads;
  std::vector<at::Tensor> weights;
  std::vector<StepOutcome> outcomes;
  double scale = 0;
  int started_during_backward = 0;
};

// Trains `steps` steps of a fresh MLP on `data` (this rank's shard = contiguous
// rows per rank and step) with `options`. `poison(rank, step)` multiplies that loss by inf.
// `zero_stage` 1 or 2: update through a ZeroOptimizer of that stage and the same SGD options.
RankState Train(Communicator& comm, const Data& data, int64_t per_rank_batch, int steps,
                const TrainStepOptions& options,
                const std::function<bool(int, int)>& poison = nullptr, int zero_stage = 0) {
  Mlp model(kMlp, /*seed=*/3);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  std::unique_ptr<ZeroOptimizer> sharded;
  if (zero_stage > 0) {
    OptimizerOptions sgd_options;
    sgd_options.name = "sgd";
    sgd_options.lr = 0.1;
    sgd_options.momentum = 0.9;
    ZeroOptions zero;
    zero.stage = zero_stage;
    if (zero_stage == 2) {
      zero.segments = GradientBuckets(model->parameters(), options.reducer.bucket_cap_mb);
    }
    absl::StatusOr<std::unique_ptr<ZeroOptimizer>> made =
        ZeroOptimizer::Create(model->parameters(), sgd_options, sgd, comm, zero);
    EXPECT_OK(made);
    if (made.ok()) sharded = *std::move(made);
  }
  auto step =
      TrainStep::Create(model->parameters(), sgd, comm, *RealClock::Get(), options, sharded.get());
  EXPECT_OK(step);
  RankState state;
  const int64_t micro = per_rank_batch / options.accumulation_steps;
  for (int s = 0; s < steps; ++s) {
    const int64_t base = (s * comm.world_size() + comm.rank()) * per_rank_batch;
    for (int64_t m = 0; m < options.accumulation_steps; ++m) {
      at::Tensor loss;
      {
        AutocastScope scope((*step)->precision());
        loss = torch::nn::functional::cross_entropy(
            model->forward(data.inputs.narrow(0, base + m * micro, micro)),
            data.targets.narrow(0, base + m * micro, micro));
      }
      if (poison && poison(comm.rank(), s)) loss = loss * INFINITY;
      EXPECT_OK((*step)->Backward(loss));
    }
    absl::StatusOr<StepOutcome> outcome = (*step)->Finish();
    EXPECT_OK(outcome);
    state.outcomes.push_back(outcome.value_or(StepOutcome()));
  }
  for (const at::Tensor& p : model->parameters()) {
    state.grads.push_back(p.grad().defined() ? p.grad().clone() : at::Tensor());
    state.weights.push_back(p.detach().clone());
  }
  state.scale = (*step)->scaler().scale();
  state.started_during_backward = (*step)->reducer().started_during_backward();
  return state;
}

// Gradient accumulation is exact: 4 micro-batches of 16 per rank give the gradients and
// weights of 1 batch of 64 per rank, after one step and after two (momentum included).
TEST(TrainStepTest, AccumulationOfFourTimesSixteenEqualsOneTimesSixtyFour) {
  const Data data = MakeData(2 * 2 * 64, 11);
  for (const int steps : {1, 2}) {
    TrainStepOptions accumulate;
    accumulate.accumulation_steps = 4;
    accumulate.reducer.bucket_cap_mb = 0.5 / 1024;
    TrainStepOptions whole;
    whole.reducer.bucket_cap_mb = 0.5 / 1024;
    const std::vector<RankState> a = RunRanks<RankState>(
        2, [&](Communicator& comm) { return Train(comm, data, 64, steps, accumulate); });
    const std::vector<RankState> b = RunRanks<RankState>(
        2, [&](Communicator& comm) { return Train(comm, data, 64, steps, whole); });
    for (int r = 0; r < 2; ++r) {
      for (size_t i = 0; i < a[r].grads.size(); ++i) {
        EXPECT_LT(RelativeError(a[r].grads[i], b[r].grads[i]), 1e-5) << steps << " " << i;
        EXPECT_LT(RelativeError(a[r].weights[i], b[r].weights[i]), 1e-6) << steps << " " << i;
        // Ranks agree.
        EXPECT_TRUE(a[r].weights[i].equal(a[0].weights[i]));
      }
      EXPECT_GE(a[r].started_during_backward, 1);
    }
  }
}

// fp16 loss scaling: a non-finite loss on rank 0 only makes both ranks skip the step
// (weights untouched) and halve the scale; clean steps then apply, and the scale grows
// after growth_interval clean steps.
TEST(TrainStepTest, Fp16OverflowOnOneRankSkipsTheStepEverywhere) {
  const Data data = MakeData(2 * 4 * 16, 12);
  TrainStepOptions options;
  options.precision = Precision::kFp16;
  options.scaler.growth_interval = 2;
  const std::vector<RankState> zero =
      RunRanks<RankState>(2, [&](Communicator& comm) { return Train(comm, data, 16, 0, options); });
  const std::vector<RankState> got = RunRanks<RankState>(2, [&](Communicator& comm) {
    return Train(comm, data, 16, 1, options, [](int rank, int /*step*/) { return rank == 0; });
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].outcomes.size(), 1u);
    EXPECT_TRUE(got[r].outcomes[0].skipped);
    EXPECT_TRUE(std::isnan(got[r].outcomes[0].grad_norm));
    EXPECT_EQ(got[r].outcomes[0].loss_scale, 65536.0);
    EXPECT_EQ(got[r].scale, 32768.0);
    for (size_t i = 0; i < got[r].weights.size(); ++i) {
      EXPECT_TRUE(got[r].weights[i].equal(zero[r].weights[i])) << "rank " << r << " param " << i;
    }
  }
  // Step 0 overflows, steps 1 and 2 are clean: the scale halves, then doubles.
  const std::vector<RankState> later = RunRanks<RankState>(2, [&](Communicator& comm) {
    return Train(comm, data, 16, 3, options,
                 [](int rank, int step) { return rank == 1 && step == 0; });
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(later[r].outcomes.size(), 3u);
    EXPECT_TRUE(later[r].outcomes[0].skipped);
    EXPECT_FALSE(later[r].outcomes[1].skipped);
    EXPECT_FALSE(later[r].outcomes[2].skipped);
    EXPECT_EQ(later[r].outcomes[1].loss_scale, 32768.0);
    EXPECT_EQ(later[r].scale, 65536.0);
    EXPECT_TRUE(std::isfinite(later[r].outcomes[2].grad_norm));
    EXPECT_FALSE(later[r].weights[0].equal(zero[r].weights[0]));
    EXPECT_TRUE(later[r].weights[0].equal(later[0].weights[0]));
  }
}

// Unscaled gradients: fp16 loss scaling gives the fp32 gradients (same forward on CPU
// with LibTorch 1.13) up to rounding.
TEST(TrainStepTest, LossScalingIsUndoneBeforeTheUpdate) {
  const Data data = MakeData(2 * 32, 13);
  TrainStepOptions fp16;
  fp16.precision = Precision::kFp16;
  const std::vector<RankState> scaled =
      RunRanks<RankState>(2, [&](Communicator& comm) { return Train(comm, data, 32, 1, fp16); });
  const std::vector<RankState> plain = RunRanks<RankState>(
      2, [&](Communicator& comm) { return Train(comm, data, 32, 1, TrainStepOptions()); });
  const double tolerance = PlanPrecision(Precision::kFp16, c10::kCPU).autocast ? 1e-2 : 1e-5;
  for (size_t i = 0; i < plain[0].grads.size(); ++i) {
    EXPECT_LT(RelativeError(scaled[0].grads[i], plain[0].grads[i]), tolerance) << i;
  }
  EXPECT_NEAR(scaled[0].outcomes[0].grad_norm, plain[0].outcomes[0].grad_norm,
              tolerance * plain[0].outcomes[0].grad_norm);
}

TEST(TrainStepTest, ClipsToMaxGradNormAfterAveraging) {
  const Data data = MakeData(2 * 32, 14);
  TrainStepOptions options;
  options.max_grad_norm = 0.05;
  const std::vector<RankState> got =
      RunRanks<RankState>(2, [&](Communicator& comm) { return Train(comm, data, 32, 1, options); });
  const std::vector<RankState> unclipped = RunRanks<RankState>(
      2, [&](Communicator& comm) { return Train(comm, data, 32, 1, TrainStepOptions()); });
  for (int r = 0; r < 2; ++r) {
    const double norm = got[r].outcomes[0].grad_norm;
    EXPECT_NEAR(norm, unclipped[r].outcomes[0].grad_norm, 1e-6 * norm);
    ASSERT_GT(norm, 0.05);  // Otherwise the test proves nothing.
    double clipped = 0;
    for (const at::Tensor& g : got[r].grads) clipped += g.pow(2).sum().item<double>();
    EXPECT_NEAR(std::sqrt(clipped), 0.05, 1e-4);
    // Same direction as the unclipped gradient.
    EXPECT_LT(RelativeError(got[r].grads[0] * (norm / 0.05), unclipped[r].grads[0]), 1e-4);
  }
  EXPECT_EQ(got[0].outcomes[0].grad_norm, got[1].outcomes[0].grad_norm);
}

// ZeRO stage 1 behind the whole step (fp16 scaling with an overflow skip, accumulation,
// clipping, small buckets): the same outcomes and weights, bit for bit, as the plain update.
TEST(TrainStepTest, ZeroStageOneUpdateMatchesThePlainOne) {
  const Data data = MakeData(2 * 5 * 32, 13);
  TrainStepOptions options;
  options.precision = Precision::kFp16;
  options.accumulation_steps = 2;
  options.max_grad_norm = 0.5;
  options.reducer.bucket_cap_mb = 0.5 / 1024;
  const auto poison = [](int rank, int step) { return rank == 1 && step == 1; };
  std::vector<RankState> runs[2];
  for (const int stage : {0, 1}) {
    runs[stage] = RunRanks<RankState>(
        2, [&](Communicator& comm) { return Train(comm, data, 32, 5, options, poison, stage); });
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(runs[1][r].outcomes.size(), 5u);
    EXPECT_TRUE(runs[1][r].outcomes[1].skipped);
    for (size_t s = 0; s < 5; ++s) {
      if (s == 1) continue;
      EXPECT_EQ(runs[1][r].outcomes[s].grad_norm, runs[0][r].outcomes[s].grad_norm) << s;
    }
    EXPECT_EQ(runs[1][r].scale, runs[0][r].scale);
    for (size_t i = 0; i < runs[0][r].weights.size(); ++i) {
      EXPECT_TRUE(runs[1][r].weights[i].equal(runs[0][r].weights[i])) << "rank " << r << " " << i;
    }
  }
}

// ZeRO stage 2 behind the whole step (fp16 scaling with an overflow skip found on one rank's
// shard only, accumulation, small buckets, two of them in flight): the same skips, scale
// and weights bit for bit as the plain update, and no rank keeps a full gradient. The norm
// is summed per shard, so it agrees within rounding only.
TEST(TrainStepTest, ZeroStageTwoUpdateMatchesThePlainOne) {
  const Data data = MakeData(2 * 5 * 32, 13);
  TrainStepOptions options;
  options.precision = Precision::kFp16;
  options.accumulation_steps = 2;
  options.reducer.bucket_cap_mb = 0.25 / 1024;
  const auto poison = [](int rank, int step) { return rank == 1 && step == 1; };
  std::vector<RankState> runs[3];
  for (const int stage : {0, 2}) {
    runs[stage] = RunRanks<RankState>(
        2, [&](Communicator& comm) { return Train(comm, data, 32, 5, options, poison, stage); });
  }
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(runs[2][r].outcomes.size(), 5u);
    EXPECT_TRUE(runs[2][r].outcomes[1].skipped);
    for (size_t s = 0; s < 5; ++s) {
      EXPECT_EQ(runs[2][r].outcomes[s].skipped, runs[0][r].outcomes[s].skipped) << s;
      if (s == 1) continue;
      EXPECT_NEAR(runs[2][r].outcomes[s].grad_norm, runs[0][r].outcomes[s].grad_norm,
                  1e-5 * runs[0][r].outcomes[s].grad_norm)
          << s;
    }
    EXPECT_EQ(runs[2][r].scale, runs[0][r].scale);
    for (size_t i = 0; i < runs[0][r].weights.size(); ++i) {
      EXPECT_TRUE(runs[2][r].weights[i].equal(runs[0][r].weights[i])) << "rank " << r << " " << i;
      EXPECT_FALSE(runs[2][r].grads[i].defined()) << "rank " << r << " " << i;
    }
  }
  EXPECT_EQ(runs[2][0].outcomes[0].grad_norm, runs[2][1].outcomes[0].grad_norm);
}

// Clipping at stage 2 scales the shards by the coefficient of the global norm: the weights
// follow the plain clipped update within rounding (the coefficient comes from a norm summed
// in another order).
TEST(TrainStepTest, ZeroStageTwoClipsByTheGlobalNorm) {
  const Data data = MakeData(2 * 3 * 32, 17);
  TrainStepOptions options;
  options.max_grad_norm = 0.05;
  options.reducer.bucket_cap_mb = 0.25 / 1024;
  std::vector<RankState> runs[3];
  for (const int stage : {0, 2}) {
    runs[stage] = RunRanks<RankState>(
        2, [&](Communicator& comm) { return Train(comm, data, 32, 3, options, nullptr, stage); });
  }
  for (int r = 0; r < 2; ++r) {
    for (size_t s = 0; s < 3; ++s) {
      EXPECT_GT(runs[0][r].outcomes[s].grad_norm, 0.05) << "clipping is active at step " << s;
      EXPECT_NEAR(runs[2][r].outcomes[s].grad_norm, runs[0][r].outcomes[s].grad_norm,
                  1e-5 * runs[0][r].outcomes[s].grad_norm);
    }
    for (size_t i = 0; i < runs[0][r].weights.size(); ++i) {
      EXPECT_TRUE(at::allclose(runs[2][r].weights[i], runs[0][r].weights[i], 1e-5, 1e-7))
          << "rank " << r << " " << i;
    }
  }
}

TEST(TrainStepTest, RejectsBadOptionsAndMisuse) {
  Mlp model(kMlp, 1);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1));
  LocalCommunicator comm;
  TrainStepOptions options;
  options.accumulation_steps = 0;
  EXPECT_THAT(TrainStep::Create(model->parameters(), sgd, comm, *RealClock::Get(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("accumulation")));
  options.accumulation_steps = 1;
  options.max_grad_norm = -1;
  EXPECT_THAT(TrainStep::Create(model->parameters(), sgd, comm, *RealClock::Get(), options),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("max_grad_norm")));
  options.max_grad_norm = 0;
  auto step = TrainStep::Create(model->parameters(), sgd, comm, *RealClock::Get(), options);
  ASSERT_OK(step);
  EXPECT_THAT((*step)->Finish(), StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  const at::Tensor loss = model->forward(at::randn({2, 20})).sum();
  ASSERT_OK((*step)->Backward(loss));
  EXPECT_THAT((*step)->Backward(loss),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  absl::StatusOr<StepOutcome> outcome = (*step)->Finish();
  ASSERT_OK(outcome);
  EXPECT_FALSE(outcome->skipped);
  EXPECT_GT(outcome->grad_norm, 0);
}

}  // namespace
}  // namespace baton::trainer
