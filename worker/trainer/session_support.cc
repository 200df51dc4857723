#include "worker/trainer/session_support.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace baton::trainer {

int64_t BudgetSteps(const TrainerOptions& options, int64_t steps_per_epoch) {
  int64_t total = std::numeric_limits<int64_t>::max();
  if (options.max_steps > 0) total = options.max_steps;
  if (options.max_epochs > 0) total = std::min(total, options.max_epochs * steps_per_epoch);
  return total;
}

absl::StatusOr<LrSchedule> MakeLrSchedule(const TrainerOptions& options, int64_t total_steps,
                                          int64_t global_batch) {
  LrScheduleOptions schedule = options.schedule;
  schedule.base_lr = options.optimizer.lr;
  schedule.total_steps = total_steps;
  schedule.global_batch = global_batch;
  return LrSchedule::Create(schedule);
}

absl::StatusOr<CheckpointManager> MakeCheckpointManager(const TrainerOptions& options,
                                                        const TrainerContext& context,
                                                        std::string dir) {
  CheckpointManagerOptions manager;
  manager.dir = std::move(dir);
  manager.checkpoint_every = options.checkpoint_every;
  manager.keep = options.keep_checkpoints;
  manager.generation = context.generation;
  manager.job = context.job_id;
  return CheckpointManager::Create(manager);
}

absl::Status CheckRanksAgreeOnStep(Communicator& comm, int64_t step, c10::Device device,
                                   absl::string_view ranks) {
  at::Tensor steps = at::full({2}, static_cast<double>(step),
                              at::TensorOptions().dtype(at::kDouble).device(device));
  steps[1].fill_(static_cast<double>(step) * step);
  RETURN_IF_ERROR(comm.AllReduceSum(steps));
  const at::Tensor host = steps.cpu();
  const int world = comm.world_size();
  const double mean = host[0].item<double>() / world;
  if (std::abs(host[1].item<double>() / world - mean * mean) > 0.5 ||
      std::abs(mean - static_cast<double>(step)) > 0.5) {
    return absl::AbortedError(absl::StrCat(ranks, " restored different checkpoints (rank ",
                                           comm.rank(), ": step ", step, ")"));
  }
  return absl::OkStatus();
}

absl::Status CheckLease(const LeasePage* lease) {
  if (lease == nullptr || !lease->Expired()) return absl::OkStatus();
  return absl::AbortedError(
      "fenced: the worker's lease ran out unrenewed (the worker daemon hangs or lost the "
      "coordinator); the job's next generation may already run elsewhere, so this rank "
      "stops before another step");
}

absl::StatusOr<std::unique_ptr<Loader>> OpenLoader(const TrainerOptions& options,
                                                   const Dataset& train,
                                                   const DistributedSampler& sampler,
                                                   c10::Device device, LoaderPosition start,
                                                   const Clock& clock) {
  LoaderOptions loader;
  loader.threads = options.loader_threads;
  loader.prefetch_batches = options.prefetch_batches;
  loader.seed = options.seed;
  loader.device = device;
  loader.start = start;
  loader.clock = &clock;
  return Loader::Create(&train, sampler, loader);
}

int64_t TokensPerSample(const DatasetInfo& info) {
  return info.language_model && !info.input_shape.empty() ? info.input_shape.back() : 0;
}

void WindowPublisher::Publish(const WindowReport& report, MetricsWriter& metrics, std::ostream& log,
                              TrainResult& result) {
  if (absl::Status s = metrics.Write(report.fields); !s.ok() && !metrics_failed_) {
    metrics_failed_ = true;
    BATON_LOG(WARNING) << "metric lines are lost: " << s;
  }
  log << report.line << std::endl;
  if (first_) result.first_loss = report.loss;
  first_ = false;
  result.loss = report.loss;
  result.accuracy = report.accuracy;
}

}  // namespace baton::trainer
