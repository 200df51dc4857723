// Checks that need a GPU: the NCCL backend, CUDA autocast, loss scaling and a training step
// on the device, memory counters, host staging and a snapshot of device state. Every test is
// skipped where no CUDA device is usable (Debian's CPU-only LibTorch, CI); they run on a GPU
// machine with a CUDA LibTorch.

#include <ATen/ATen.h>
#include <torch/cuda.h>
#include <torch/nn/functional/loss.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cmath>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/checkpoint/checkpoint_codec.h"
#include "worker/trainer/checkpoint/training_state.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/nccl_communicator.h"
#include "worker/trainer/device/device.h"
#include "worker/trainer/device/host_staging.h"
#include "worker/trainer/device/precision.h"
#include "worker/trainer/models/mlp.h"
#include "worker/trainer/snapshot/snapshot_codec.h"
#include "worker/trainer/step/grad_scaler.h"
#include "worker/trainer/step/train_step.h"

namespace baton::trainer {
namespace {

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
    absl::StatusOr<c10::Device> device = ResolveDevice("cuda", /*local_rank=*/0);
    ASSERT_OK(device);
    device_ = *device;
  }

  // A one-rank NCCL communicator over a TCPStore on port 0.
  std::unique_ptr<Communicator> Nccl() {
    c10d::TCPStoreOptions options;
    options.port = 0;
    options.isServer = true;
    options.numWorkers = 1;
    options.waitWorkers = false;
    options.timeout = std::chrono::seconds(30);
    auto store = c10::make_intrusive<c10d::TCPStore>("127.0.0.1", options);
    absl::StatusOr<std::unique_ptr<Communicator>> comm =
        CreateNcclCommunicator(store, 0, 1, device_.index(), absl::Seconds(60));
    EXPECT_OK(comm);
    return comm.ok() ? *std::move(comm) : nullptr;
  }

  c10::Device device_ = c10::Device(c10::kCPU);
};

TEST_F(CudaTest, DeviceAutoPicksTheGpu) {
  absl::StatusOr<c10::Device> device = ResolveDevice("auto", 0);
  ASSERT_OK(device);
  EXPECT_TRUE(device->is_cuda());
  EXPECT_TRUE(NcclAvailable());
}

TEST_F(CudaTest, NcclAllReduceAndBroadcast) {
  std::unique_ptr<Communicator> comm = Nccl();
  ASSERT_NE(comm, nullptr);
  EXPECT_EQ(comm->backend(), "nccl");
  EXPECT_TRUE(comm->CanReduce(at::kBFloat16));
  at::Tensor t = at::arange(8, at::TensorOptions().dtype(at::kFloat).device(device_));
  ASSERT_OK(comm->AllReduceSum(t));
  EXPECT_TRUE(t.cpu().equal(at::arange(8, at::kFloat)));
  at::Tensor half = at::full({4}, 3.0, at::TensorOptions().dtype(at::kHalf).device(device_));
  absl::StatusOr<std::unique_ptr<PendingCollective>> pending = comm->StartAllReduceSum(half);
  ASSERT_OK(pending);
  ASSERT_OK((*pending)->Wait());
  EXPECT_EQ(half.cpu()[0].item<float>(), 3.0f);
  ASSERT_OK(comm->Broadcast(t, 0));
  EXPECT_THAT(comm->StartAllReduceSum(at::ones({2})).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("cuda")));
}

// ncclReduceScatter and ncclAllGather through ProcessGroupNCCL's flat collectives, in a world
// of one (a copy each); the sizes are checked before NCCL is called.
TEST_F(CudaTest, NcclReduceScatterAndAllGather) {
  std::unique_ptr<Communicator> comm = Nccl();
  ASSERT_NE(comm, nullptr);
  const auto on_gpu = [this](at::ScalarType dtype) {
    return at::TensorOptions().dtype(dtype).device(device_);
  };
  for (const at::ScalarType dtype : {at::kFloat, at::kBFloat16}) {
    const at::Tensor input = at::arange(6, on_gpu(dtype));
    at::Tensor output = at::zeros({6}, on_gpu(dtype));
    ASSERT_OK(comm->ReduceScatterSum(input.clone(), output));
    EXPECT_TRUE(output.cpu().equal(at::arange(6, at::TensorOptions().dtype(dtype))));
    at::Tensor gathered = at::zeros({6}, on_gpu(dtype));
    ASSERT_OK(comm->AllGather(input, gathered));
    EXPECT_TRUE(gathered.cpu().equal(input.cpu()));
  }
  EXPECT_THAT(comm->ReduceScatterSum(at::ones({4}, on_gpu(at::kFloat)),
                                     at::empty({3}, on_gpu(at::kFloat))),
              StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("world size 1")));
}

TEST_F(CudaTest, AutocastOnCuda) {
  torch::nn::Linear linear(16, 8);
  linear->to(device_);
  const at::Tensor x = at::randn({4, 16}, at::TensorOptions().device(device_));
  for (const Precision p : {Precision::kFp16, Precision::kBf16}) {
    const PrecisionPlan plan = PlanPrecision(p, c10::kCUDA);
    ASSERT_TRUE(plan.autocast);
    AutocastScope scope(plan);
    EXPECT_EQ(linear(x).scalar_type(), p == Precision::kFp16 ? at::kHalf : at::kBFloat16);
  }
  EXPECT_EQ(linear(x).scalar_type(), at::kFloat);
}

TEST_F(CudaTest, Fp16TrainStepOnTheGpuLearnsAndSkipsOverflow) {
  std::unique_ptr<Communicator> comm = Nccl();
  ASSERT_NE(comm, nullptr);
  Mlp model(MlpOptions{32, {64}, 4}, 3);
  model->to(device_);
  torch::optim::SGD sgd(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  TrainStepOptions options;
  options.precision = Precision::kFp16;
  options.accumulation_steps = 2;
  options.max_grad_norm = 5;
  auto step = TrainStep::Create(model->parameters(), sgd, *comm, *RealClock::Get(), options);
  ASSERT_OK(step);
  at::Generator gen = at::detail::createCPUGenerator(1);
  const at::Tensor x = at::randn({64, 32}, gen, at::kFloat).to(device_);
  const at::Tensor y = (x.narrow(1, 0, 4).argmax(1)).to(device_);
  double first = 0, last = 0;
  for (int s = 0; s < 40; ++s) {
    double loss_sum = 0;
    for (int m = 0; m < 2; ++m) {
      at::Tensor loss;
      {
        AutocastScope scope((*step)->precision());
        loss = torch::nn::functional::cross_entropy(model->forward(x.narrow(0, m * 32, 32)),
                                                    y.narrow(0, m * 32, 32));
      }
      if (s == 5) loss = loss * INFINITY;  // One overflow step.
      loss_sum += loss.item<double>();
      ASSERT_OK((*step)->Backward(loss));
    }
    absl::StatusOr<StepOutcome> outcome = (*step)->Finish();
    ASSERT_OK(outcome);
    EXPECT_EQ(outcome->skipped, s == 5) << s;
    if (s == 0) first = loss_sum / 2;
    last = loss_sum / 2;
  }
  EXPECT_EQ((*step)->scaler().scale(), 32768.0);
  EXPECT_LT(last, 0.5 * first);
  for (const at::Tensor& p : model->parameters()) {
    EXPECT_TRUE(p.grad().is_cuda());
    EXPECT_TRUE(at::isfinite(p.detach()).all().item<bool>());
  }
}

TEST_F(CudaTest, MemoryCounters) {
  ResetPeakMemory(device_);
  at::Tensor big = at::empty({64 << 20}, at::TensorOptions().dtype(at::kByte).device(device_));
  std::optional<DeviceMemory> memory = MemoryStats(device_);
  ASSERT_TRUE(memory.has_value());
  EXPECT_GE(memory->allocated_bytes, 64 << 20);
  EXPECT_GE(memory->reserved_bytes, memory->allocated_bytes);
  EXPECT_GE(memory->peak_allocated_bytes, memory->allocated_bytes);
  EXPECT_FALSE(MemoryStats(c10::Device(c10::kCPU)).has_value());
  SynchronizeDevice(device_);
}

// Copies staged on a side stream land in pinned host memory by Wait(), after the compute
// queued before Stage(); the next round reuses the buffers; CPU tensors pass through.
TEST_F(CudaTest, HostStagingCopiesOnASideStream) {
  HostStaging staging;
  at::Tensor a = at::arange(1 << 22, at::TensorOptions().dtype(at::kFloat).device(device_));
  a.mul_(2);  // Queued on the compute stream before Stage().
  const at::Tensor host = staging.Stage(a);
  EXPECT_FALSE(host.is_cuda());
  EXPECT_TRUE(host.is_pinned());
  staging.Wait();
  EXPECT_TRUE(host.equal(a.cpu()));
  a.add_(1);
  const at::Tensor again = staging.Stage(a);
  EXPECT_EQ(again.data_ptr(), host.data_ptr());
  staging.Wait();
  EXPECT_TRUE(again.equal(a.cpu()));
  const at::Tensor cpu = at::ones({3});
  EXPECT_TRUE(staging.Stage(cpu).is_same(cpu));
}

// A GPU rank's snapshot: parameters and SGD momentum on the device, staged at Plan and
// written after; it decodes to the device values, bit for bit.
TEST_F(CudaTest, ASnapshotOfDeviceStateDecodesToItsValues) {
  at::Tensor w = at::randn({256, 128}, at::TensorOptions().device(device_)).requires_grad_();
  torch::optim::SGD sgd({w}, torch::optim::SGDOptions(0.1).momentum(0.9));
  w.mutable_grad() = at::ones_like(w);
  sgd.step();
  TrainingState state;
  state.progress.step = 7;
  state.tensors = {{"w", w}};
  state.optimizer = &sgd;
  HostStaging staging;
  absl::StatusOr<SnapshotImage> image = SnapshotImage::Plan(state, &staging);
  ASSERT_OK(image);
  std::string bytes(image->size(), '\0');
  image->WriteTo(bytes.data());
  absl::StatusOr<DecodedCheckpoint> decoded = DecodeSnapshot(bytes);
  ASSERT_OK(decoded);
  EXPECT_EQ(decoded->progress.step, 7);
  EXPECT_TRUE(decoded->model.at("w").equal(w.detach().cpu()));
  ASSERT_EQ(decoded->optimizer_state.size(), 1u);
  // The first step's momentum buffer is the gradient.
  EXPECT_TRUE(decoded->optimizer_state[0].at("momentum_buffer").equal(at::ones({256, 128})));
}

}  // namespace
}  // namespace baton::trainer
