// Measures the pipeline bubble: S stages of an MLP whose stages are equally heavy (square
// layers split evenly), as threads of this process over the shared-memory communicator, one
// intra-op thread each, GPipe or 1F1B with M micro-batches. For every step after the first it
// takes each stage's time waiting for peers over the step's time (StepResult.wait / total,
// executor.h) and prints, per stage, the mean of that fraction next to the theoretical
// (S - 1) / (M + S - 1). Used by bench/pipeline.sh; needs S free cores to mean anything.
//
// Usage: pipeline_bench STAGES MICRO_BATCHES gpipe|1f1b STEPS [WIDTH] [ROWS_PER_MICRO_BATCH]
// Prints one line per stage: "stage=<s> total_ms=<mean> wait_ms=<mean> bubble=<mean>", then
// "theory=<fraction> measured=<mean over stages>".

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include "absl/time/time.h"
#include "worker/trainer/comm/shm_communicator.h"
#include "worker/trainer/models/mlp.h"
#include "worker/trainer/pipeline/executor.h"
#include "worker/trainer/pipeline/schedule.h"
#include "worker/trainer/pipeline/stage_model.h"

namespace baton::trainer::pipeline {
namespace {

struct StageTimes {
  double total_ms = 0;
  double wait_ms = 0;
  double bubble = 0;
  std::string error;
};

StageTimes RunStage(const c10::intrusive_ptr<c10d::Store>& store, int stage, int stages,
                    int micro_batches, ScheduleKind kind, int steps, int64_t width, int64_t rows) {
  StageTimes out;
  at::set_num_threads(1);
  ShmOptions shm;
  shm.collective_timeout = absl::Minutes(2);
  absl::StatusOr<std::unique_ptr<Communicator>> comm =
      CreateShmCommunicator(store, stage, stages, shm);
  if (!comm.ok()) {
    out.error = comm.status().ToString();
    return out;
  }
  // 2 square layers per stage.
  const MlpOptions options{width, std::vector<int64_t>(2 * stages - 1, width), width};
  Mlp model(options, /*seed=*/1);
  absl::StatusOr<std::unique_ptr<StageModel>> part = MakeMlpStage(model, stage, stages);
  absl::StatusOr<std::unique_ptr<PipelineExecutor>> executor =
      part.ok() ? PipelineExecutor::Create(**part, **comm, nullptr, kind, micro_batches)
                : absl::StatusOr<std::unique_ptr<PipelineExecutor>>(part.status());
  if (!executor.ok()) {
    out.error = executor.status().ToString();
    return out;
  }
  torch::optim::SGD sgd((*part)->Parameters(), torch::optim::SGDOptions(0.01));
  at::Generator gen = at::detail::createCPUGenerator(7);
  const at::Tensor x = at::randn({rows * micro_batches, width}, gen);
  const at::Tensor y = at::randint(width, {rows * micro_batches}, gen, at::kLong);
  const LossFn loss = [](const at::Tensor& logits, const at::Tensor& targets) {
    return torch::nn::functional::cross_entropy(logits, targets);
  };
  for (int step = 0; step <= steps; ++step) {  // Step 0 warms up.
    sgd.zero_grad();
    absl::StatusOr<StepResult> result = (*executor)->RunStep(x, y, loss);
    if (!result.ok()) {
      out.error = result.status().ToString();
      return out;
    }
    sgd.step();
    if (step == 0) continue;
    const double total = absl::ToDoubleMilliseconds(result->total);
    const double wait = absl::ToDoubleMilliseconds(result->wait);
    out.total_ms += total / steps;
    out.wait_ms += wait / steps;
    out.bubble += wait / total / steps;
  }
  return out;
}

}  // namespace
}  // namespace baton::trainer::pipeline

int main(int argc, char** argv) {
  using namespace baton::trainer::pipeline;
  if (argc < 5) {
    std::fprintf(stderr,
                 "usage: %s STAGES MICRO_BATCHES gpipe|1f1b STEPS [WIDTH] [ROWS_PER_MICRO_BATCH]\n",
                 argv[0]);
    return 2;
  }
  const int stages = std::atoi(argv[1]);
  const int micro_batches = std::atoi(argv[2]);
  absl::StatusOr<ScheduleKind> kind = ParseScheduleKind(argv[3]);
  const int steps = std::atoi(argv[4]);
  const int64_t width = argc > 5 ? std::atoll(argv[5]) : 512;
  const int64_t rows = argc > 6 ? std::atoll(argv[6]) : 64;
  if (!kind.ok() || stages < 1 || micro_batches < 1 || steps < 1 || width < 1 || rows < 1) {
    std::fprintf(stderr, "pipeline_bench: bad arguments%s%s\n", kind.ok() ? "" : ": ",
                 kind.ok() ? "" : kind.status().ToString().c_str());
    return 2;
  }
  c10d::TCPStoreOptions server_options;
  server_options.port = 0;
  server_options.isServer = true;
  server_options.numWorkers = stages;
  server_options.waitWorkers = false;
  server_options.timeout = std::chrono::seconds(60);
  std::vector<c10::intrusive_ptr<c10d::Store>> stores = {
      c10::make_intrusive<c10d::TCPStore>("127.0.0.1", server_options)};
  for (int s = 1; s < stages; ++s) {
    c10d::TCPStoreOptions client = server_options;
    client.isServer = false;
    client.port = static_cast<c10d::TCPStore&>(*stores[0]).getPort();
    stores.push_back(c10::make_intrusive<c10d::TCPStore>("127.0.0.1", client));
  }
  std::vector<std::future<StageTimes>> futures;
  for (int s = 0; s < stages; ++s) {
    futures.push_back(std::async(std::launch::async, [&, s] {
      return RunStage(stores[s], s, stages, micro_batches, *kind, steps, width, rows);
    }));
  }
  double measured = 0;
  int failed = 0;
  for (int s = 0; s < stages; ++s) {
    const StageTimes t = futures[s].get();
    if (!t.error.empty()) {
      std::fprintf(stderr, "stage %d: %s\n", s, t.error.c_str());
      ++failed;
      continue;
    }
    std::printf("stage=%d total_ms=%.2f wait_ms=%.2f bubble=%.4f\n", s, t.total_ms, t.wait_ms,
                t.bubble);
    measured += t.bubble / stages;
  }
  if (failed > 0) return 1;
  std::printf("theory=%.4f measured=%.4f\n", BubbleFraction(stages, micro_batches), measured);
  return 0;
}
