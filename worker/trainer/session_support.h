#pragma once

// What both training loops (training_session.h and pipeline_session.h) do alike: the step
// budget, the LR schedule over it, the checkpoint manager of a directory, the check that
// every rank restored the same step, the loader, and what becomes of each window's report.
// Thread-compatible.

#include <c10/core/Device.h>

#include <cstdint>
#include <memory>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/time/clock.h"
#include "worker/trainer/checkpoint/checkpoint_manager.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/contract/metrics_writer.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/data/loader/distributed_sampler.h"
#include "worker/trainer/data/loader/loader.h"
#include "worker/trainer/optim/lr_schedule.h"
#include "worker/trainer/trainer_options.h"
#include "worker/trainer/training_window.h"

namespace baton::trainer {

// Optimizer steps the budget allows: max_steps, capped at max_epochs epochs of
// steps_per_epoch steps (each 0 = no limit; neither: int64's max).
int64_t BudgetSteps(const TrainerOptions& options, int64_t steps_per_epoch);

// options.schedule with optimizer.lr as its base lr, over total_steps steps of global_batch
// samples. Errors as LrSchedule::Create.
absl::StatusOr<LrSchedule> MakeLrSchedule(const TrainerOptions& options, int64_t total_steps,
                                          int64_t global_batch);

// The checkpoint manager of `dir` with options' cadence and retention and the context's job
// and generation. Errors as CheckpointManager::Create.
absl::StatusOr<CheckpointManager> MakeCheckpointManager(const TrainerOptions& options,
                                                        const TrainerContext& context,
                                                        std::string dir);

// ABORTED unless every rank of `comm` restored `step` (the mean and variance of the ranks'
// steps; one all-reduce of two doubles on `device`): a rank whose save was cut short by a
// crash has an older newest checkpoint. `ranks` names them in the message ("ranks",
// "pipeline stages"). Errors of the collective.
absl::Status CheckRanksAgreeOnStep(Communicator& comm, int64_t step, c10::Device device,
                                   absl::string_view ranks);

// The loader of `sampler`'s batches of `train` on `device` from `start`, with options'
// threads, prefetch and seed, timed by `clock`. Errors as Loader::Create.
absl::StatusOr<std::unique_ptr<Loader>> OpenLoader(const TrainerOptions& options,
                                                   const Dataset& train,
                                                   const DistributedSampler& sampler,
                                                   c10::Device device, LoaderPosition start,
                                                   const Clock& clock);

// The lease check both loops make before every step (TrainerContext::lease): OK without a
// lease page or while the lease holds; ABORTED ("fenced") once it has run out.
absl::Status CheckLease(const LeasePage* lease);

// Tokens per sample of a language model's data (the last input dimension), else 0.
int64_t TokensPerSample(const DatasetInfo& info);

// What becomes of each window's report: its metric line goes to `metrics` (a failed write
// is warned about once, and training goes on: the metrics reader may be gone), its log line
// to `log`, and `result` keeps the first window's loss and the newest loss and accuracy.
class WindowPublisher {
 public:
  void Publish(const WindowReport& report, MetricsWriter& metrics, std::ostream& log,
               TrainResult& result);

 private:
  bool first_ = true;
  bool metrics_failed_ = false;
};

}  // namespace baton::trainer
