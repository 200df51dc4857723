#include "worker/trainer/step/gradient_reducer.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>

#include <algorithm>
#include <memory>
#include <vector>

#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/testing/test_ranks.h"
#include "worker/trainer/models/mlp.h"
#include "worker/trainer/profile/trace.h"

namespace baton::trainer {
namespace {

using ::baton::trainer::testing::RunRanks;
using ::testing::HasSubstr;
using Kind = ReducerEvent::Kind;

constexpr int64_t kBatch = 32;
const MlpOptions kMlp{/*input_dim=*/20, /*hidden=*/{16, 8}, /*num_classes=*/5};
// Bytes: layer 0 = 16x20 + 16 floats (1344 B), layer 1 = 8x16 + 8 (544 B), layer 2 =
// 5x8 + 5 (180 B). A 512-byte cap gives four small buckets.
constexpr double kSmallBucketMb = 0.5 / 1024;

double RelativeError(const at::Tensor& got, const at::Tensor& want) {
  return (got - want).norm().item<double>() / want.norm().item<double>();
}

struct Batch {
  at::Tensor inputs;
  at::Tensor targets;
};

Batch MakeBatch(int64_t n, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return {at::randn({n, kMlp.input_dim}, gen, at::kFloat),
          at::randint(kMlp.num_classes, {n}, gen, at::kLong)};
}

std::vector<at::Tensor> Grads(Mlp& model) {
  std::vector<at::Tensor> grads;
  for (const at::Tensor& p : model->parameters()) grads.push_back(p.grad().clone());
  return grads;
}

TEST(ParseGradCompressionTest, Names) {
  EXPECT_EQ(*ParseGradCompression(""), GradCompression::kNone);
  EXPECT_EQ(*ParseGradCompression("none"), GradCompression::kNone);
  EXPECT_EQ(*ParseGradCompression("bf16"), GradCompression::kBf16);
  EXPECT_EQ(*ParseGradCompression("fp16"), GradCompression::kFp16);
  EXPECT_THAT(ParseGradCompression("int8"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--grad_compression=int8")));
}

TEST(GradientReducerTest, BucketsFollowReverseParameterOrderUnderTheCap) {
  Mlp model(kMlp, /*seed=*/1);
  LocalCommunicator comm;
  GradientReducerOptions options;
  options.bucket_cap_mb = kSmallBucketMb;
  absl::StatusOr<std::unique_ptr<GradientReducer>> reducer =
      GradientReducer::Create(model->parameters(), comm, options);
  ASSERT_OK(reducer);
  // Parameters: 0 w0 (1280 B), 1 b0 (64 B), 2 w1 (512 B), 3 b1 (32 B), 4 w2 (160 B),
  // 5 b2 (20 B). A parameter larger than the cap gets a bucket of its own.
  EXPECT_THAT((*reducer)->buckets(),
              ::testing::ElementsAre(::testing::ElementsAre(5, 4, 3), ::testing::ElementsAre(2),
                                     ::testing::ElementsAre(1), ::testing::ElementsAre(0)));
  options.bucket_cap_mb = 25;
  reducer = GradientReducer::Create(model->parameters(), comm, options);
  ASSERT_OK(reducer);
  EXPECT_EQ((*reducer)->buckets().size(), 1u);

  options.bucket_cap_mb = 0;
  EXPECT_THAT(GradientReducer::Create(model->parameters(), comm, options),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bucket_cap_mb")));
  EXPECT_THAT(GradientReducer::Create({}, comm, GradientReducerOptions()),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
}

// Data parallelism with the bucketed, overlapped reducer is exact: averaging two half
// batches' gradients over two ranks gives the whole batch's gradient in one process.
TEST(GradientReducerTest, TwoRankBucketedGradientsEqualSingleProcessGradients) {
  const Batch batch = MakeBatch(kBatch, 123);
  Mlp reference(kMlp, /*seed=*/9);
  torch::nn::functional::cross_entropy(reference->forward(batch.inputs), batch.targets)
      .backward();
  const std::vector<at::Tensor> want = Grads(reference);

  struct RankResult {
    std::vector<at::Tensor> grads;
    std::vector<ReducerEvent> events;
    int buckets = 0;
    int started_during_backward = 0;
  };
  const std::vector<RankResult> got = RunRanks<RankResult>(2, [&](Communicator& comm) {
    Mlp model(kMlp, /*seed=*/9);
    GradientReducerOptions options;
    options.bucket_cap_mb = kSmallBucketMb;
    auto reducer = GradientReducer::Create(model->parameters(), comm, options);
    EXPECT_OK(reducer);
    RankResult result;
    // Two steps: the second proves hooks and buffers are reusable.
    for (int step = 0; step < 2; ++step) {
      model->zero_grad();
      const int64_t half = kBatch / 2;
      (*reducer)->BeginBackward(/*sync=*/true);
      torch::nn::functional::cross_entropy(
          model->forward(batch.inputs.narrow(0, comm.rank() * half, half)),
          batch.targets.narrow(0, comm.rank() * half, half))
          .backward();
      EXPECT_OK((*reducer)->FinishBackward());
    }
    result.grads = Grads(model);
    result.events = (*reducer)->last_events();
    result.buckets = (*reducer)->buckets().size();
    result.started_during_backward = (*reducer)->started_during_backward();
    return result;
  });

  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].grads.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_LT(RelativeError(got[r].grads[i], want[i]), 1e-5) << "rank " << r << " param " << i;
    }
    EXPECT_EQ(got[r].buckets, 4);
    // Overlap is real: bucket 0 (the last layers) was started from a hook, before the
    // gradients of the first layer existed and before backward() returned.
    const std::vector<ReducerEvent>& events = got[r].events;
    const auto first_start = std::find(events.begin(), events.end(),
                                       ReducerEvent{Kind::kBucketStarted, 0});
    const auto first_layer_ready =
        std::find(events.begin(), events.end(), ReducerEvent{Kind::kGradReady, 0});
    const auto returned =
        std::find(events.begin(), events.end(), ReducerEvent{Kind::kBackwardReturned, -1});
    ASSERT_NE(first_start, events.end());
    ASSERT_NE(first_layer_ready, events.end());
    ASSERT_NE(returned, events.end());
    EXPECT_LT(first_start - events.begin(), first_layer_ready - events.begin());
    EXPECT_LT(first_start - events.begin(), returned - events.begin());
    EXPECT_GE(got[r].started_during_backward, 2) << "rank " << r;
    // Every parameter's hook fired once and every bucket started once.
    EXPECT_EQ(std::count_if(events.begin(), events.end(),
                            [](const ReducerEvent& e) { return e.kind == Kind::kGradReady; }),
              6);
    EXPECT_EQ(std::count_if(events.begin(), events.end(),
                            [](const ReducerEvent& e) { return e.kind == Kind::kBucketStarted; }),
              4);
  }
  // A half batch alone is a different gradient: the comparison above can fail.
  Mlp half(kMlp, /*seed=*/9);
  torch::nn::functional::cross_entropy(half->forward(batch.inputs.narrow(0, 0, kBatch / 2)),
                                       batch.targets.narrow(0, 0, kBatch / 2))
      .backward();
  EXPECT_GT(RelativeError(Grads(half)[0], want[0]), 1e-2);
}

// gradient_as_bucket_view: the gradients become the buckets' memory after the first step
// (the same tensors from then on: nothing is copied), with the same values as gradients of
// their own.
TEST(GradientReducerTest, GradientsAsBucketViewsMatchGradientsOfTheirOwn) {
  const Batch batch = MakeBatch(kBatch, 321);
  struct RankResult {
    std::vector<std::vector<at::Tensor>> grads;  // per mode
    std::vector<void*> first_ptrs, last_ptrs;    // view mode, after steps 1 and 3
  };
  const std::vector<RankResult> got = RunRanks<RankResult>(2, [&](Communicator& comm) {
    RankResult result;
    for (const bool as_view : {false, true}) {
      Mlp model(kMlp, /*seed=*/5);
      GradientReducerOptions options;
      options.bucket_cap_mb = kSmallBucketMb;
      options.gradient_as_bucket_view = as_view;
      auto reducer = GradientReducer::Create(model->parameters(), comm, options);
      EXPECT_OK(reducer);
      for (int step = 0; step < 3; ++step) {
        model->zero_grad();
        const int64_t half = kBatch / 2;
        (*reducer)->BeginBackward(/*sync=*/true);
        torch::nn::functional::cross_entropy(
            model->forward(batch.inputs.narrow(0, comm.rank() * half, half) * (step + 1)),
            batch.targets.narrow(0, comm.rank() * half, half))
            .backward();
        EXPECT_OK((*reducer)->FinishBackward());
        if (!as_view || step == 1) continue;
        auto& ptrs = step == 0 ? result.first_ptrs : result.last_ptrs;
        for (const at::Tensor& p : model->parameters()) ptrs.push_back(p.grad().data_ptr());
      }
      std::vector<at::Tensor> grads;
      for (const at::Tensor& g : Grads(model)) grads.push_back(g.clone());
      result.grads.push_back(grads);
    }
    return result;
  });
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(got[r].grads.size(), 2u);
    for (size_t i = 0; i < got[r].grads[0].size(); ++i) {
      EXPECT_TRUE(got[r].grads[1][i].equal(got[r].grads[0][i])) << "rank " << r << " param " << i;
    }
    EXPECT_EQ(got[r].first_ptrs, got[r].last_ptrs) << "rank " << r;
  }
}

// A parameter that one rank did not use contributes zeros there, so the mean is the
// other rank's gradient / 2; the buckets still start in the same order on both ranks.
TEST(GradientReducerTest, UnusedParameterContributesZeros) {
  const std::vector<std::vector<at::Tensor>> got =
      RunRanks<std::vector<at::Tensor>>(2, [](Communicator& comm) {
        at::Tensor used = at::ones({3}, at::kFloat).requires_grad_();
        at::Tensor sometimes = at::ones({2}, at::kFloat).requires_grad_();
        GradientReducerOptions options;
        options.bucket_cap_mb = 1e-6;  // One parameter per bucket.
        auto reducer = GradientReducer::Create({used, sometimes}, comm, options);
        EXPECT_OK(reducer);
        (*reducer)->BeginBackward(true);
        at::Tensor loss = (used * (comm.rank() + 1.0)).sum();
        if (comm.rank() == 0) loss = loss + (sometimes * 4.0).sum();
        loss.backward();
        EXPECT_OK((*reducer)->FinishBackward());
        return std::vector<at::Tensor>{used.grad(), sometimes.grad()};
      });
  for (const auto& grads : got) {
    EXPECT_TRUE(grads[0].equal(at::full({3}, 1.5, at::kFloat)));
    EXPECT_TRUE(grads[1].equal(at::full({2}, 2.0, at::kFloat)));
  }
}

// While tracing, each bucket's all-reduce is a span on the collectives thread with its bytes,
// and nothing is recorded once tracing stops.
TEST(GradientReducerTest, TracesEachBucketsAllReduce) {
  const std::vector<std::vector<TraceSpan>> got =
      RunRanks<std::vector<TraceSpan>>(2, [](Communicator& comm) {
        at::Tensor a = at::ones({3}, at::kFloat).requires_grad_();
        at::Tensor b = at::ones({5}, at::kFloat).requires_grad_();
        GradientReducerOptions options;
        options.bucket_cap_mb = 1e-6;  // One parameter per bucket.
        auto reducer = GradientReducer::Create({a, b}, comm, options);
        EXPECT_OK(reducer);
        TraceRecorder recorder;
        (*reducer)->SetTrace(&recorder, RealClock::Get(), 42);
        (*reducer)->BeginBackward(true);
        ((a + 0).sum() + (b * 2).sum()).backward();
        EXPECT_OK((*reducer)->FinishBackward());
        (*reducer)->SetTrace(nullptr, nullptr, 0);
        (*reducer)->BeginBackward(true);
        ((a + 0).sum() + (b * 2).sum()).backward();
        EXPECT_OK((*reducer)->FinishBackward());
        return recorder.Spans();
      });
  for (const std::vector<TraceSpan>& spans : got) {
    ASSERT_EQ(spans.size(), 2u);
    // Buckets in start order: reverse parameter order, so b (20 bytes) first.
    EXPECT_EQ(spans[0].name, "allreduce bucket 0");
    EXPECT_EQ(spans[0].int_args.at("bytes"), 20);
    EXPECT_EQ(spans[1].int_args.at("bytes"), 12);
    for (const TraceSpan& span : spans) {
      EXPECT_EQ(span.category, "comm");
      EXPECT_EQ(span.thread, kCommTraceThread);
      EXPECT_EQ(span.int_args.at("step"), 42);
      EXPECT_EQ(span.string_args.at("backend"), "gloo");
      EXPECT_GE(span.duration, absl::ZeroDuration());
    }
  }
}

// No communication on non-final micro-batches; the final one averages the local sums.
TEST(GradientReducerTest, NoSyncMicroBatchesDoNotCommunicate) {
  const std::vector<std::vector<ReducerEvent>> got =
      RunRanks<std::vector<ReducerEvent>>(2, [](Communicator& comm) {
        at::Tensor w = at::ones({4}, at::kFloat).requires_grad_();
        auto reducer = GradientReducer::Create({w}, comm, GradientReducerOptions());
        EXPECT_OK(reducer);
        (*reducer)->BeginBackward(/*sync=*/false);
        (w * (comm.rank() + 1.0)).sum().backward();
        EXPECT_TRUE((*reducer)->last_events().empty());
        EXPECT_THAT((*reducer)->FinishBackward(),
                    StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
        (*reducer)->BeginBackward(/*sync=*/true);
        (w * 10.0).sum().backward();
        EXPECT_OK((*reducer)->FinishBackward());
        // Local sums 11 and 12 -> mean 11.5.
        EXPECT_TRUE(w.grad().equal(at::full({4}, 11.5, at::kFloat)));
        return (*reducer)->last_events();
      });
  for (const auto& events : got) {
    EXPECT_THAT(events, ::testing::ElementsAre(ReducerEvent{Kind::kGradReady, 0},
                                               ReducerEvent{Kind::kBucketStarted, 0},
                                               ReducerEvent{Kind::kBackwardReturned, -1}));
  }
}

// Compressed all-reduce: a close mean, and no overflow for fp16 where the inputs fit.
TEST(GradientReducerTest, CompressionRoundTripIsClose) {
  for (const GradCompression compression : {GradCompression::kFp16, GradCompression::kBf16}) {
    const double tolerance = compression == GradCompression::kFp16 ? 2e-3 : 1.6e-2;
    at::Generator gen = at::detail::createCPUGenerator(5);
    const at::Tensor g0 = at::randn({300}, gen, at::kFloat);
    const at::Tensor g1 = at::randn({300}, gen, at::kFloat);
    const at::Tensor want = (g0 + g1) / 2;
    const std::vector<std::vector<at::Tensor>> got =
        RunRanks<std::vector<at::Tensor>>(2, [&](Communicator& comm) {
          at::Tensor w = at::zeros({300}, at::kFloat).requires_grad_();
          at::Tensor big = at::zeros({2}, at::kFloat).requires_grad_();
          GradientReducerOptions options;
          options.compression = compression;
          auto reducer = GradientReducer::Create({w, big}, comm, options);
          EXPECT_OK(reducer);
          (*reducer)->BeginBackward(true);
          // 60000 on both ranks: their fp16 sum (120000) would overflow; the mean fits.
          ((w * (comm.rank() == 0 ? g0 : g1)).sum() + (big * 60000.0).sum()).backward();
          EXPECT_OK((*reducer)->FinishBackward());
          if (compression == GradCompression::kBf16) {
            EXPECT_EQ((*reducer)->compression_emulated(), !comm.CanReduce(at::kBFloat16));
          } else {
            EXPECT_FALSE((*reducer)->compression_emulated());
          }
          return std::vector<at::Tensor>{w.grad(), big.grad()};
        });
    for (const auto& grads : got) {
      EXPECT_EQ(grads[0].scalar_type(), at::kFloat);
      EXPECT_LT(RelativeError(grads[0], want), tolerance);
      EXPECT_GT(RelativeError(grads[0], want), 0);  // It really went through 16 bits.
      EXPECT_TRUE(at::isfinite(grads[1]).all().item<bool>());
      EXPECT_NEAR(grads[1][0].item<double>(), 60000.0, 60000.0 * tolerance);
    }
  }
}


// Sharded mode (ZeRO stage 2): each bucket's mean gradient, laid out as the bucket (its
// parameters end to end, then zeros), arrives cut into the ranks' outputs; no rank keeps a
// param.grad(); the reduce-scatters still start during backward.
TEST(GradientReducerTest, ShardedModeReduceScattersEachBucketIntoTheOutputs) {
  const Batch batch = MakeBatch(2 * kBatch, 31);
  // The reference: the plain mean gradients over both ranks' rows.
  Mlp reference(kMlp, /*seed=*/5);
  torch::nn::functional::cross_entropy(reference->forward(batch.inputs), batch.targets)
      .backward();
  const std::vector<at::Tensor> want = Grads(reference);
  const std::vector<std::vector<size_t>> buckets =
      GradientBuckets(reference->parameters(), kSmallBucketMb);
  ASSERT_EQ(buckets.size(), 4u);

  struct Out {
    std::vector<at::Tensor> outputs;
    bool grads_left = true;
    int started_during_backward = 0;
  };
  const std::vector<Out> got = RunRanks<Out>(2, [&](Communicator& comm) {
    Out out;
    Mlp model(kMlp, /*seed=*/5);
    GradientReducerOptions options;
    options.bucket_cap_mb = kSmallBucketMb;
    auto reducer = GradientReducer::Create(model->parameters(), comm, options);
    EXPECT_OK(reducer);
    if (!reducer.ok()) return out;
    EXPECT_EQ((*reducer)->buckets(), buckets);
    for (const std::vector<size_t>& bucket : buckets) {
      int64_t numel = 0;
      for (size_t p : bucket) numel += model->parameters()[p].numel();
      out.outputs.push_back(at::full({(numel + 1) / 2 + 3}, 7.0));  // Spare room: padding.
    }
    EXPECT_OK((*reducer)->ReduceScatterInto(out.outputs));
    EXPECT_TRUE((*reducer)->sharded());
    (*reducer)->BeginBackward(/*sync=*/true);
    // This rank's rows: the sum over ranks of half-batch means, halved, is the full mean.
    torch::nn::functional::cross_entropy(
        model->forward(batch.inputs.narrow(0, comm.rank() * kBatch, kBatch)),
        batch.targets.narrow(0, comm.rank() * kBatch, kBatch))
        .backward();
    EXPECT_OK((*reducer)->FinishBackward());
    out.grads_left = false;
    for (const at::Tensor& p : model->parameters()) out.grads_left |= p.grad().defined();
    out.started_during_backward = (*reducer)->started_during_backward();
    return out;
  });
  for (size_t b = 0; b < buckets.size(); ++b) {
    SCOPED_TRACE(b);
    std::vector<at::Tensor> parts;
    for (size_t p : buckets[b]) parts.push_back(want[p].reshape(-1));
    const at::Tensor whole = at::cat({got[0].outputs[b], got[1].outputs[b]});
    const int64_t numel = at::cat(parts).numel();
    EXPECT_LT(RelativeError(whole.narrow(0, 0, numel), at::cat(parts)), 1e-5);
    EXPECT_TRUE(at::equal(whole.narrow(0, numel, whole.numel() - numel),
                          at::zeros({whole.numel() - numel})));
  }
  for (const Out& out : got) {
    EXPECT_FALSE(out.grads_left);
    EXPECT_GT(out.started_during_backward, 0);
  }
}

TEST(GradientReducerTest, ShardedModeRejectsWhatCannotWork) {
  Mlp model(kMlp, /*seed=*/1);
  LocalCommunicator local;
  auto alone = GradientReducer::Create(model->parameters(), local, GradientReducerOptions{});
  ASSERT_OK(alone);
  EXPECT_THAT((*alone)->ReduceScatterInto({at::zeros({1000})}),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("more than one rank")));
  RunRanks<int>(2, [&](Communicator& comm) {
    Mlp m(kMlp, /*seed=*/1);
    GradientReducerOptions options;
    options.compression = GradCompression::kBf16;
    auto compressed = GradientReducer::Create(m->parameters(), comm, options);
    EXPECT_OK(compressed);
    EXPECT_THAT((*compressed)->ReduceScatterInto({at::zeros({1000})}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("compression")));
    auto plain = GradientReducer::Create(m->parameters(), comm, GradientReducerOptions{});
    EXPECT_OK(plain);
    EXPECT_THAT((*plain)->ReduceScatterInto({at::zeros({1000}), at::zeros({1000})}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("2 outputs for 1")));
    EXPECT_THAT((*plain)->ReduceScatterInto({at::zeros({10})}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at least")));
    EXPECT_THAT((*plain)->ReduceScatterInto({at::zeros({1000}, at::kDouble)}),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("float")));
    EXPECT_FALSE((*plain)->sharded());
    return 0;
  });
}

}  // namespace
}  // namespace baton::trainer
