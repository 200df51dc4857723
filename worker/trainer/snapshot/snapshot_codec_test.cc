#include "worker/trainer/snapshot/snapshot_codec.h"

#include <ATen/Functions.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>

#include <memory>
#include <string>
#include <vector>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/checkpoint/checkpoint_codec.h"

namespace baton::trainer {
namespace {

using ::baton::StatusIs;
using ::testing::HasSubstr;

// A small model (two parameters, one buffer) and an optimizer that has taken `steps` steps.
struct Model {
  at::Tensor w = at::randn({3, 4}).set_requires_grad(true);
  at::Tensor b = at::randn({4}, at::kDouble).set_requires_grad(true);
  at::Tensor count = at::arange(5, at::kLong);
  std::unique_ptr<torch::optim::Optimizer> optimizer;

  Model(bool adamw, int steps) {
    if (adamw) {
      optimizer = std::make_unique<torch::optim::AdamW>(
          std::vector<at::Tensor>{w, b}, torch::optim::AdamWOptions(0.1).amsgrad(true));
    } else {
      optimizer = std::make_unique<torch::optim::SGD>(std::vector<at::Tensor>{w, b},
                                                      torch::optim::SGDOptions(0.1).momentum(0.9));
    }
    for (int i = 0; i < steps; ++i) {
      optimizer->zero_grad();
      (w.sum() * 2 + b.pow(2).sum().to(at::kFloat)).backward();
      optimizer->step();
    }
  }

  TrainingState State(int64_t step) {
    TrainingState s;
    s.progress.step = step;
    s.progress.epoch = 2;
    s.progress.batch_in_epoch = 7;
    s.progress.samples_seen = 640;
    s.progress.world_size = 3;
    s.progress.scaler_scale = 0.1;  // Not exact in decimal: must round-trip bit for bit.
    s.progress.scaler_growth_tracker = 5;
    s.progress.rng_extra = std::string("rng\0bytes", 9);
    s.tensors = {{"w", w}, {"b", b}, {"count", count}};
    s.optimizer = optimizer.get();
    return s;
  }
};

std::string Bytes(const SnapshotImage& image) {
  std::string bytes(image.size(), '\xee');
  image.WriteTo(bytes.data());
  return bytes;
}

void ExpectSame(const DecodedCheckpoint& a, const DecodedCheckpoint& b) {
  EXPECT_EQ(a.progress.step, b.progress.step);
  EXPECT_EQ(a.progress.epoch, b.progress.epoch);
  EXPECT_EQ(a.progress.batch_in_epoch, b.progress.batch_in_epoch);
  EXPECT_EQ(a.progress.samples_seen, b.progress.samples_seen);
  EXPECT_EQ(a.progress.world_size, b.progress.world_size);
  EXPECT_EQ(a.progress.scaler_scale, b.progress.scaler_scale);
  EXPECT_EQ(a.progress.scaler_growth_tracker, b.progress.scaler_growth_tracker);
  EXPECT_EQ(a.progress.rng_extra, b.progress.rng_extra);
  ASSERT_EQ(a.model.size(), b.model.size());
  for (const auto& [name, t] : a.model) EXPECT_TRUE(t.equal(b.model.at(name))) << name;
  EXPECT_EQ(a.optimizer_type, b.optimizer_type);
  EXPECT_EQ(a.optimizer_params, b.optimizer_params);
  ASSERT_EQ(a.optimizer_state.size(), b.optimizer_state.size());
  for (size_t i = 0; i < a.optimizer_state.size(); ++i) {
    ASSERT_EQ(a.optimizer_state[i].size(), b.optimizer_state[i].size()) << i;
    for (const auto& [key, t] : a.optimizer_state[i]) {
      EXPECT_TRUE(t.equal(b.optimizer_state[i].at(key))) << i << " " << key;
    }
  }
  EXPECT_TRUE(a.rng_cpu.equal(b.rng_cpu));
  EXPECT_EQ(a.rng_cuda.size(), b.rng_cuda.size());
}

class SnapshotCodecTest : public ::testing::TestWithParam<bool> {};

// A snapshot decodes to exactly what the checkpoint of the same state decodes to.
TEST_P(SnapshotCodecTest, DecodesAsTheCheckpointOfTheSameState) {
  Model m(/*adamw=*/GetParam(), /*steps=*/2);
  const TrainingState state = m.State(12);
  ASSERT_OK_AND_ASSIGN(const SnapshotImage image, SnapshotImage::Plan(state));
  EXPECT_EQ(image.step(), 12);
  ASSERT_OK_AND_ASSIGN(const std::vector<char> sealed, EncodeTrainingState(state));
  ASSERT_OK_AND_ASSIGN(const DecodedCheckpoint from_checkpoint, DecodeCheckpoint(sealed));
  ASSERT_OK_AND_ASSIGN(const DecodedCheckpoint from_snapshot, DecodeSnapshot(Bytes(image)));
  ExpectSame(from_snapshot, from_checkpoint);
}

// Applied to a fresh model, a snapshot restores the parameters, buffers and optimizer so
// that the next steps match bit for bit.
TEST_P(SnapshotCodecTest, RestoredStateTrainsOnIdentically) {
  Model original(GetParam(), 3);
  ASSERT_OK_AND_ASSIGN(const SnapshotImage image, SnapshotImage::Plan(original.State(3)));
  const std::string bytes = Bytes(image);
  Model restored(GetParam(), 1);  // Different values and optimizer state.
  TrainingState target = restored.State(0);
  ASSERT_OK_AND_ASSIGN(const DecodedCheckpoint d, DecodeSnapshot(bytes));
  ASSERT_OK(ApplyCheckpoint(d, target, /*restore_rng=*/false));
  EXPECT_EQ(target.progress.step, 3);
  for (Model* m : {&original, &restored}) {
    m->optimizer->zero_grad();
    (m->w.sum() * 2 + m->b.pow(2).sum().to(at::kFloat)).backward();
    m->optimizer->step();
  }
  EXPECT_TRUE(original.w.equal(restored.w));
  EXPECT_TRUE(original.b.equal(restored.b));
  EXPECT_TRUE(original.count.equal(restored.count));
}

// Encoded as a checkpoint file (a disk checkpoint written from a snapshot), a snapshot
// decodes to what the checkpoint of the same state decodes to, model order kept.
TEST_P(SnapshotCodecTest, EncodesAsTheCheckpointOfTheSameState) {
  Model m(GetParam(), 2);
  const TrainingState state = m.State(12);
  ASSERT_OK_AND_ASSIGN(const SnapshotImage image, SnapshotImage::Plan(state));
  ASSERT_OK_AND_ASSIGN(const DecodedCheckpoint from_snapshot, DecodeSnapshot(Bytes(image)));
  EXPECT_EQ(from_snapshot.model_order, (std::vector<std::string>{"w", "b", "count"}));
  ASSERT_OK_AND_ASSIGN(const std::vector<char> sealed, EncodeDecodedCheckpoint(from_snapshot));
  ASSERT_OK_AND_ASSIGN(const DecodedCheckpoint reencoded, DecodeCheckpoint(sealed));
  ASSERT_OK_AND_ASSIGN(const DecodedCheckpoint from_checkpoint,
                       DecodeCheckpoint(*EncodeTrainingState(state)));
  ExpectSame(reencoded, from_checkpoint);
  EXPECT_EQ(reencoded.model_order, from_checkpoint.model_order);
}

INSTANTIATE_TEST_SUITE_P(Optimizers, SnapshotCodecTest, ::testing::Values(false, true),
                         [](const auto& info) { return info.param ? "AdamW" : "SGD"; });

// Before the first step the optimizer has no state; the snapshot still round-trips.
TEST(SnapshotCodec, OptimizerWithoutStateYet) {
  Model m(false, 0);
  ASSERT_OK_AND_ASSIGN(const SnapshotImage image, SnapshotImage::Plan(m.State(0)));
  ASSERT_OK_AND_ASSIGN(const DecodedCheckpoint d, DecodeSnapshot(Bytes(image)));
  ASSERT_EQ(d.optimizer_state.size(), 2u);
  EXPECT_TRUE(d.optimizer_state[0].empty());
}

TEST(SnapshotCodec, RefusesWhatACheckpointRefuses) {
  Model m(false, 1);
  TrainingState s = m.State(-1);
  EXPECT_THAT(SnapshotImage::Plan(s), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_));
  s = m.State(1);
  s.tensors.push_back({"w", m.w});
  EXPECT_THAT(SnapshotImage::Plan(s),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duplicate")));
  s = m.State(1);
  s.tensors.push_back({"a b", m.w});
  EXPECT_THAT(SnapshotImage::Plan(s),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("whitespace")));
}

// Every truncation and a flipped byte anywhere in the header are DATA_LOSS or, for bytes
// that only change a value, a snapshot that still decodes: never a crash.
TEST(SnapshotCodec, TornOrDamagedBytesAreRefused) {
  Model m(true, 1);
  ASSERT_OK_AND_ASSIGN(const SnapshotImage image, SnapshotImage::Plan(m.State(4)));
  const std::string bytes = Bytes(image);
  for (size_t n = 0; n < bytes.size(); n += (n < 1024 ? 1 : 997)) {
    EXPECT_THAT(DecodeSnapshot(absl::string_view(bytes).substr(0, n)),
                StatusIs(absl::StatusCode::kDataLoss, ::testing::_))
        << n;
  }
  size_t header_end = 0;
  std::memcpy(&header_end, bytes.data() + 8, sizeof(uint64_t));
  header_end += 16;
  for (size_t i = 0; i < header_end; ++i) {
    for (char c : {'\0', '9', ' ', '\n', '-'}) {
      std::string damaged = bytes;
      damaged[i] = c;
      (void)DecodeSnapshot(damaged);  // Must not crash or read out of bounds.
    }
  }
  EXPECT_THAT(DecodeSnapshot("BSNAP001"), StatusIs(absl::StatusCode::kDataLoss, ::testing::_));
  EXPECT_THAT(DecodeSnapshot("not a snapshot at all"),
              StatusIs(absl::StatusCode::kDataLoss, ::testing::_));
}

TEST(EncodeDecodedCheckpoint, RefusesWhatNoCheckpointHolds) {
  Model m(false, 1);
  ASSERT_OK_AND_ASSIGN(const SnapshotImage image, SnapshotImage::Plan(m.State(4)));
  ASSERT_OK_AND_ASSIGN(const DecodedCheckpoint d, DecodeSnapshot(Bytes(image)));
  DecodedCheckpoint unordered = d;
  unordered.model_order.pop_back();
  EXPECT_THAT(EncodeDecodedCheckpoint(unordered),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("model_order names 2")));
  DecodedCheckpoint twice = d;
  twice.model_order[1] = twice.model_order[0];
  EXPECT_THAT(EncodeDecodedCheckpoint(twice),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("\"w\" twice")));
  DecodedCheckpoint other = d;
  other.optimizer_type = "other";
  EXPECT_THAT(EncodeDecodedCheckpoint(other),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("SGD's and AdamW's")));
  DecodedCheckpoint negative = d;
  negative.progress.step = -1;
  EXPECT_THAT(EncodeDecodedCheckpoint(negative),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("negative step")));
}

}  // namespace
}  // namespace baton::trainer
