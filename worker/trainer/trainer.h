#pragma once

// The training loop of the built-in trainer: data-parallel training of a Model on a
// Dataset, one process per rank, on the device of its Communicator (CPU + Gloo, or one GPU
// + NCCL).
//
// Setup: the model (models/model.h) is built from the options and the dataset's shape,
// moved to the device and made identical on every rank (seeded init, then a broadcast of
// parameters and buffers from rank 0); the optimizer, LR schedule (optim/) and the step
// engine (train_step.h: bucketed all-reduce overlapped with backward, mixed precision,
// loss scaling, clipping) are built over its parameters. With a checkpoint_dir, every rank
// restores the newest valid training-state checkpoint (optim/checkpoint_manager.h), the
// ranks check they restored the same step, and rank 0 records the generation's start there,
// which fences older generations' writers off the directory.
//
// Step: accumulation_steps micro-batches of batch_size samples from this rank's Loader
// (data/loader.h, which follows the DistributedSampler), forward + loss under autocast,
// backward (only the last micro-batch communicates), then TrainStep::Finish with the
// schedule's lr. An epoch has floor(batches_per_epoch / accumulation_steps) steps; the
// leftover micro-batches at an epoch's end are not used. Rank 0 saves a checkpoint every
// checkpoint_every steps and after the last step.
//
// Buffers (BatchNorm running statistics) are not averaged: each rank's come from its own
// batches, and rank 0's are saved. Before evaluation they are broadcast from rank 0, so
// every rank evaluates the model final.pt holds (DDP's broadcast_buffers gives the same
// rank-0 statistics by broadcasting them every step; training-mode forwards never read
// them, so the result is identical).
//
// End: the test split, if any, is evaluated (every rank scores a strided shard; one
// all-reduce of (correct, count)); rank 0 writes <checkpoint_dir>/final.pt. Metric lines:
// see contract.h.
//
// Threading: Run() is called once, on one thread; it borrows everything in TrainerContext.

#include <atomic>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "common/trainer_spec_defaults.h"
#include "worker/trainer/communicator.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/metrics_writer.h"
#include "worker/trainer/models/model.h"
#include "worker/trainer/optim/lr_schedule.h"
#include "worker/trainer/optim/optimizer.h"
#include "worker/trainer/precision.h"
#include "worker/trainer/train_step.h"

namespace baton::trainer {

// The training fields of TrainerSpec (and Budget, checkpoint_dir), one per baton-trainer
// flag; defaults and allowed values: common/trainer_spec_defaults.h.
struct TrainerOptions {
  ModelOptions model;          // model.seed is replaced by `seed`.
  OptimizerOptions optimizer;  // optimizer.lr is the base lr of the schedule.
  // kind, warmup_steps, step_size, gamma, min_lr, base_batch; the trainer fills in
  // base_lr, total_steps and global_batch.
  LrScheduleOptions schedule;
  TrainStepOptions step;  // precision, accumulation_steps, clipping, buckets, ...
  // Samples per rank per micro-batch (with global_batch: at most).
  int64_t batch_size = trainer_spec::kBatchSize.default_value;
  // > 0: samples per optimizer step over all ranks, whatever the world size; the per-rank
  // micro-batch and accumulation steps are derived from it (SplitGlobalBatch) and the data
  // order is world-size independent (DistributedSampler::CreateForGlobalBatch), so a resized
  // gang resumes exactly. step.accumulation_steps must then be 1.
  int64_t global_batch = trainer_spec::kGlobalBatch.default_value;
  // Non-empty: this rank appends one line per optimizer step, "<generation> <step> <rank>
  // <id>,<id>,..." (the dataset indices it trained on), to "<sample_log>.<rank>". A step
  // re-run after a restore is logged again; the entry of the highest generation counts.
  std::string sample_log;
  // 0: load on the training thread.
  int loader_threads = static_cast<int>(trainer_spec::kLoaderThreads.default_value);
  int prefetch_batches = static_cast<int>(trainer_spec::kPrefetchBatches.default_value);
  uint64_t seed = trainer_spec::kSeed.default_value;  // Model init, data order, augmentation.
  int64_t log_every = trainer_spec::kLogEvery.default_value;  // Steps between metric lines.
  int64_t max_steps = trainer_spec::kMaxSteps.default_value;  // 0 = no limit.
  // 0 = no limit. At least one of max_steps/max_epochs is > 0.
  int64_t max_epochs = trainer_spec::kMaxEpochs.default_value;
  std::string checkpoint_dir;  // Checkpoints and final.pt; empty = none.
  // Steps between checkpoints; 0 = only at the end.
  int64_t checkpoint_every = trainer_spec::kCheckpointEvery.default_value;
  int keep_checkpoints = static_cast<int>(trainer_spec::kKeepCheckpoints.default_value);
};

// Checks every field against the table (common/trainer_spec_defaults.h), the same ranges
// submit enforces, and the rules between fields (global_batch with accumulation_steps 1;
// lr_step_size > 0 for the step schedule; nesterov needs sgd with momentum > 0; a budget).
// Returns OK or INVALID_ARGUMENT naming the flag: "--<flag>: <value> is out of range; must
// be ...".
absl::Status ValidateTrainerOptions(const TrainerOptions& options);

// Borrowed collaborators; all must outlive Trainer::Run().
struct TrainerContext {
  const Dataset* train = nullptr;  // Required.
  const Dataset* test = nullptr;   // Optional (no eval_accuracy when null).
  Communicator* comm = nullptr;    // Required; LocalCommunicator for one process.
  MetricsWriter* metrics = nullptr;  // Required (may be disabled).
  const Clock* clock = nullptr;      // Required; times the steps and their phases.
  std::ostream* log = nullptr;       // Required; one human-readable line per metric line.
  // Optional. When it becomes true the loop stops before the next step, writes a metric line
  // for the steps since the last one, and returns with `stopped` set, without evaluation,
  // checkpoint or further collectives.
  const std::atomic<bool>* stop = nullptr;
  // Optional, honoured on rank 0 only. When it becomes true the loop stops at the next step
  // boundary, saves a training-state checkpoint of the steps done (when checkpoint_dir is
  // set; none is lost), writes a metric line for the steps since the last one, and returns
  // with `checkpointed` set. The other ranks then fail their next collective (rank 0 left):
  // whoever asked (the worker, for a resize or a drain) stops and restarts the gang.
  const std::atomic<bool>* checkpoint_request = nullptr;
  // The gang's rendezvous generation (BATON_GENERATION; 0 = unknown), for the sample log and
  // for fencing the checkpoint directory (see optim/checkpoint_manager.h).
  int64_t generation = 0;
  // The job (BATON_JOB_ID; empty = unknown), whose generations fence the checkpoint directory.
  std::string job_id;
};

struct TrainResult {
  int64_t steps = 0;  // Optimizer steps completed (global, restored ones included).
  int64_t epoch = 0;  // 0-based epoch of the last step.
  // Averages over the first and the last metric window of this run (NaN if no step ran).
  double first_loss = 0;
  double loss = 0;
  double accuracy = 0;
  std::optional<double> eval_accuracy;
  std::string checkpoint_path;  // final.pt, when this rank saved it.
  std::string restored_from;    // The checkpoint this run resumed from, if any.
  int64_t skipped_steps = 0;    // fp16 overflow steps (no update applied).
  bool stopped = false;         // Ended early by TrainerContext::stop.
  bool checkpointed = false;    // Ended by TrainerContext::checkpoint_request.
};

class Trainer {
 public:
  Trainer(TrainerOptions options, TrainerContext context);

  // Trains to the budget. Errors: INVALID_ARGUMENT for bad options, a model that does not
  // fit the data or a dataset too small for world_size x batch_size x accumulation_steps;
  // UNAVAILABLE when a collective fails; ABORTED when the ranks restored different
  // checkpoints; the checkpoint manager's errors for a checkpoint that cannot be restored;
  // FAILED_PRECONDITION naming the newer generation when one has started in checkpoint_dir
  // (found at the start, at a checkpoint or at the final save: this generation is
  // superseded and must stop); INTERNAL for LibTorch errors or a failed checkpoint write.
  // A failed metrics write is logged and not fatal.
  absl::StatusOr<TrainResult> Run();

 private:
  absl::StatusOr<TrainResult> RunOrThrow();
  // Accuracy on the test split, identical on every rank (collective).
  absl::StatusOr<double> Evaluate(Model& model, const PrecisionPlan& precision);

  const TrainerOptions options_;
  const TrainerContext context_;
};

}  // namespace baton::trainer
