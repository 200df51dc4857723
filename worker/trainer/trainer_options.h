#pragma once

// What the training loop (trainer.h) is given and what it returns: its options (one per
// baton-trainer flag, defaults and ranges from common/spec/trainer_spec_defaults.h), the
// collaborators it borrows, and its result. No training code, so baton-trainer's flag
// parsing (trainer_flags.h) depends on it without the loop.

#include <atomic>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/time/clock.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/contract/lease_page.h"
#include "worker/trainer/contract/metrics_writer.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/device/precision.h"
#include "worker/trainer/models/model.h"
#include "worker/trainer/optim/lr_schedule.h"
#include "worker/trainer/optim/optimizer.h"
#include "worker/trainer/progress/progress_tracker.h"
#include "worker/trainer/step/train_step.h"

namespace baton::trainer {

class Profiler;

// The training fields of TrainerSpec (and Budget, checkpoint_dir), one per baton-trainer
// flag; defaults and allowed values: common/spec/trainer_spec_defaults.h.
struct TrainerOptions {
  ModelOptions model;          // model.seed is replaced by `seed`.
  OptimizerOptions optimizer;  // optimizer.lr is the base lr of the schedule.
  // kind, warmup_steps, step_size, gamma, min_lr, base_batch; the trainer fills in
  // base_lr, total_steps and global_batch.
  LrScheduleOptions schedule;
  TrainStepOptions step;  // precision, accumulation_steps, clipping, buckets, ...
  // ZeRO (TrainerSpec.zero; zero/zero_optimizer.h; both the same as 0 on one rank): 1
  // shards the optimizer state over the ranks, 2 the gradients too; offload keeps the
  // sharded state in host memory when training on GPUs (a no-op on CPU).
  int zero_stage = static_cast<int>(trainer_spec::kZeroStage.default_value);
  bool zero_offload_optimizer = trainer_spec::kZeroOffloadOptimizer.default_value;
  // Pipeline parallelism (TrainerSpec.pipeline): checked (ranges and the rules between
  // fields, trainer_spec::CheckPipeline); stages > 1 runs PipelineSession
  // (pipeline_session.h), which also refuses sample_log.
  int pipeline_stages = static_cast<int>(trainer_spec::kPipelineStages.default_value);
  int pipeline_micro_batches = static_cast<int>(trainer_spec::kPipelineMicroBatches.default_value);
  std::string pipeline_schedule = std::string(trainer_spec::kPipelineSchedule.default_value);
  // Samples per rank per micro-batch (with global_batch: at most).
  int64_t batch_size = trainer_spec::kBatchSize.default_value;
  // > 0: samples per optimizer step over all ranks, whatever the world size; the per-rank
  // micro-batch and accumulation steps are derived from it (SplitGlobalBatch) and the data
  // order is world-size independent (DistributedSampler::CreateForGlobalBatch), so a resized
  // gang resumes exactly. step.accumulation_steps must then be 1.
  int64_t global_batch = trainer_spec::kGlobalBatch.default_value;
  // Non-empty: this rank appends one line per optimizer step, "<generation> <step> <rank>
  // <id>,<id>,..." (the dataset indices it trained on), to "<sample_log>.<rank>", written
  // once its gradients' exchange completed, before the update. A step re-run after a
  // restore is logged again; the entry of the highest generation counts.
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
  int64_t eval_every = trainer_spec::kEvalEvery.default_value;  // 0: after the last step only
  int keep_checkpoints = static_cast<int>(trainer_spec::kKeepCheckpoints.default_value);
  // In-memory snapshots (snapshot/snapshot_store.h) into TrainerContext::snapshot_dir:
  // 0 = every step while one costs at most 1 % of a step (CPU) or 5 % (GPU, ZeRO), less
  // often otherwise; N = every N steps; -1 = never.
  int64_t snapshot_every = trainer_spec::kSnapshotEvery.default_value;
};

// Calls visit(entry, member) for each TrainerOptions member a table entry describes
// (common/spec/trainer_spec_defaults.h), in table order: the one list of which option holds
// which setting. ValidateTrainerOptions checks each member against its entry, and
// OptionsFromFlags (trainer_flags.h) fills each from the entry's flag. `Options` is
// TrainerOptions or const TrainerOptions. Not here: the settings only the data options
// keep (dataset, data_dir, ...) and --threads (trainer_flags.h: ForEachFlagOption).
template <typename Options, typename Visit>
void ForEachTableOption(Options& o, Visit&& visit) {
  namespace ts = ::baton::trainer_spec;
  visit(ts::kModel, o.model.model);
  visit(ts::kBatchSize, o.batch_size);
  visit(ts::kLr, o.optimizer.lr);
  visit(ts::kMomentum, o.optimizer.momentum);
  visit(ts::kSeed, o.seed);
  visit(ts::kHidden, o.model.hidden);
  visit(ts::kLogEvery, o.log_every);
  visit(ts::kPrecision, o.step.precision);
  visit(ts::kAccumulationSteps, o.step.accumulation_steps);
  visit(ts::kBucketCapMb, o.step.reducer.bucket_cap_mb);
  visit(ts::kGradCompression, o.step.reducer.compression);
  visit(ts::kMaxGradNorm, o.step.max_grad_norm);
  visit(ts::kOptimizer, o.optimizer.name);
  visit(ts::kWeightDecay, o.optimizer.weight_decay);
  visit(ts::kNesterov, o.optimizer.nesterov);
  visit(ts::kAdamBeta1, o.optimizer.adam_beta1);
  visit(ts::kAdamBeta2, o.optimizer.adam_beta2);
  visit(ts::kAdamEps, o.optimizer.adam_eps);
  visit(ts::kLrSchedule, o.schedule.kind);
  visit(ts::kWarmupSteps, o.schedule.warmup_steps);
  visit(ts::kLrStepSize, o.schedule.step_size);
  visit(ts::kLrGamma, o.schedule.gamma);
  visit(ts::kMinLr, o.schedule.min_lr);
  visit(ts::kBaseBatch, o.schedule.base_batch);
  visit(ts::kLoaderThreads, o.loader_threads);
  visit(ts::kPrefetchBatches, o.prefetch_batches);
  visit(ts::kContextLength, o.model.context_length);
  visit(ts::kGptLayers, o.model.gpt_layers);
  visit(ts::kGptHeads, o.model.gpt_heads);
  visit(ts::kGptWidth, o.model.gpt_width);
  visit(ts::kVocabSize, o.model.vocab_size);
  visit(ts::kTorchscriptPath, o.model.torchscript_path);
  visit(ts::kTask, o.model.task);
  visit(ts::kCheckpointEvery, o.checkpoint_every);
  visit(ts::kKeepCheckpoints, o.keep_checkpoints);
  visit(ts::kSnapshotEvery, o.snapshot_every);
  visit(ts::kEvalEvery, o.eval_every);
  visit(ts::kGlobalBatch, o.global_batch);
  visit(ts::kSampleLog, o.sample_log);
  visit(ts::kActivationCheckpointing, o.model.activation_checkpointing);
  visit(ts::kZeroStage, o.zero_stage);
  visit(ts::kZeroOffloadOptimizer, o.zero_offload_optimizer);
  visit(ts::kPipelineStages, o.pipeline_stages);
  visit(ts::kPipelineMicroBatches, o.pipeline_micro_batches);
  visit(ts::kPipelineSchedule, o.pipeline_schedule);
  visit(ts::kMaxSteps, o.max_steps);
  visit(ts::kMaxEpochs, o.max_epochs);
  visit(ts::kCheckpointDir, o.checkpoint_dir);
}

// Checks every member ForEachTableOption lists against its table entry
// (common/spec/trainer_spec_defaults.h: the ranges submit enforces), in that order, then the
// rules between them (common/spec/trainer_rules.h: activation checkpointing needs a
// model with blocks; nesterov needs sgd with momentum > 0; lr_step_size > 0 for the step
// schedule; global_batch with accumulation_steps 1; ZeRO offload needs stage 1 or 2, stage
// 2 no gradient compression; the pipeline rules; no sample_log with a pipeline; a budget).
// Returns OK or INVALID_ARGUMENT naming the flag: "--<flag>: <value> is out of range; must
// be ...".
absl::Status ValidateTrainerOptions(const TrainerOptions& options);

// Borrowed collaborators; all must outlive Trainer::Run().
struct TrainerContext {
  const Dataset* train = nullptr;    // Required.
  const Dataset* test = nullptr;     // Optional (no eval_accuracy when null).
  Communicator* comm = nullptr;      // Required; LocalCommunicator for one process.
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
  // Except with ZeRO stage 1 or 2 on more than one rank (zero_stage): the optimizer state is
  // sharded, so rank 0's request is shared with every rank at each step boundary (one
  // scalar all-reduce per step); every rank takes part in the save and returns with
  // `checkpointed` set.
  const std::atomic<bool>* checkpoint_request = nullptr;
  // The gang's rendezvous generation (BATON_GENERATION; 0 = unknown), for the sample log and
  // for fencing the checkpoint directory (see checkpoint/checkpoint_manager.h).
  int64_t generation = 0;
  // The job (BATON_JOB_ID; empty = unknown), whose generations fence the checkpoint directory.
  std::string job_id;
  // Optional: records requested windows of steps as trace files (profile/profiler.h).
  Profiler* profiler = nullptr;
  // Optional: the worker's lease (contract/lease_page.h, BATON_LEASE_FD), read before every
  // step. Once it has run out the loop returns ABORTED at once ("fenced"): no further step,
  // collective, metric line or checkpoint, since the job's next generation may already run
  // elsewhere. The second fencing layer, after the rank's shim (which SIGKILLs it).
  const LeasePage* lease = nullptr;
  // In-memory snapshots (snapshot/snapshot_store.h; TrainerOptions::snapshot_every): the
  // directory on a memory file system the worker keeps for the job on this host
  // (BATON_SNAPSHOT_DIR; empty: no snapshots), and this rank's writer name there (empty:
  // it only reads). One rank per worker writes (local rank 0): in data parallelism every
  // rank holds the same state, so each worker of the gang holds a whole copy and the loss
  // of any one worker or host leaves the others' copies.
  std::string snapshot_dir;
  std::string snapshot_writer;
  // Optional: told the phase of training and each completed step, for the heartbeat
  // (progress/heartbeat.h). The caller makes `comm` report its collectives to it
  // (progress/tracked_communicator.h).
  ProgressTracker* progress = nullptr;
  // Fault injection for tests (contract.h, kEnvFaultEpochDelay): every data epoch boundary
  // takes this much longer, as a slow storage listing would make it. Zero in production.
  absl::Duration fault_epoch_delay = absl::ZeroDuration();
  // Fault injection for tests (kEnvFaultHang): the training thread of rank fault_hang_rank
  // blocks for good before optimizer step fault_hang_step (0: never).
  int fault_hang_rank = 0;
  int64_t fault_hang_step = 0;
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

}  // namespace baton::trainer
