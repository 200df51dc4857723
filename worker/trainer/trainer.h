#pragma once

// The training loop of the built-in trainer: data-parallel training of a Model on a
// Dataset, one process per rank, on the device of its Communicator (CPU + Gloo, or one GPU
// + NCCL).
//
// Setup: the model (models/model.h) is built from the options and the dataset's shape,
// moved to the device and made identical on every rank (seeded init, then a broadcast of
// parameters and buffers from rank 0); the optimizer, LR schedule (optim/) and the step
// engine (step/train_step.h: bucketed all-reduce overlapped with backward, mixed precision,
// loss scaling, clipping) are built over its parameters. With a checkpoint_dir, every rank
// restores the newest valid training-state checkpoint (checkpoint/checkpoint_manager.h), the
// ranks check they restored the same step, and rank 0 records the generation's start there,
// which fences older generations' writers off the directory.
//
// Step: accumulation_steps micro-batches of batch_size samples from this rank's Loader
// (data/loader/loader.h, which follows the DistributedSampler), forward + loss under autocast,
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
// see contract/contract.h.
//
// The loop runs as a TrainingSession (training_session.h): setup, restore, steps and metric
// lines. With pipeline_stages > 1 it runs as a PipelineSession instead (pipeline_session.h:
// each rank one stage of the model, per-stage checkpoints and final.pt, no evaluation).
// Options, context and result: trainer_options.h.
//
// Threading: Run() is called once, on one thread; it borrows everything in TrainerContext.

#include "absl/status/statusor.h"
#include "worker/trainer/trainer_options.h"

namespace baton::trainer {

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
  // Validates the options and runs a TrainingSession's phases (training_session.h);
  // LibTorch errors are thrown.
  absl::StatusOr<TrainResult> RunOrThrow();

  const TrainerOptions options_;
  const TrainerContext context_;
};

}  // namespace baton::trainer
