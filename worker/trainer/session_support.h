#pragma once

// What both training loops (training_session.h and pipeline_session.h) do alike: the step
// budget, the LR schedule over it, the checkpoint manager of a directory, and the check that
// every rank restored the same step. Plain functions; thread-compatible.

#include <c10/core/Device.h>

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "worker/trainer/checkpoint/checkpoint_manager.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/optim/lr_schedule.h"
#include "worker/trainer/trainer_options.h"

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

}  // namespace baton::trainer
