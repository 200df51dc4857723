#pragma once

// One run of the training loop with pipeline parallelism (pipeline_stages S > 1; Trainer::Run
// picks it), with the phases of TrainingSession (Setup, Restore, Train; each once, in order).
//
// Layout: world W = S x D. Rank r is stage r % S of pipeline (replica) r / S, as
// pipeline/process_groups.h defines; its pipeline's and its stage's groups are
// SubgroupCommunicators over the world's communicator (no store is needed).
// Model: each rank builds its stage only (pipeline/stage_factory.h: the rest of the model is
// released after the split) and an optimizer over the stage's parameters.
// Data: the sampler runs over the D pipelines (rank = replica), so every stage of a pipeline
// draws the same batches; the first stage feeds the inputs, the last computes the loss
// against the targets. The per-pipeline batch of a step is batch_size (with global_batch:
// global_batch / D), split into pipeline_micro_batches equal micro-batches
// (pipeline/executor.h; the loss of each is divided by M, the stages' gradients averaged
// over their D replicas). One optimizer step per batch (accumulation_steps must be 1).
// Clipping: the global norm over the whole model (each stage's sum of squares, wte once,
// summed over the pipeline), so every stage clips by the same coefficient.
// Metric lines: every rank writes one; loss and accuracy are the last stages' (summed over
// the world at each line, a collective), so rank 0's line carries the loss.
// Checkpoints: per stage (pipeline/checkpoint_layout.h), written by replica 0 of each stage,
// read by every replica of it; restore needs the same S (FAILED_PRECONDITION naming both
// otherwise) and may change D (elastic resize): with global_batch the data position follows
// from the step exactly, as without pipelines. final.pt is per stage too
// (<stage dir>/final.pt: that stage's parameters).
// Not with pipelines (refused by ValidateTrainerOptions): fp16/bf16, accumulation_steps > 1,
// grad_compression, zero_stage, sample_log, activation checkpointing. No evaluation: the
// result has no eval_accuracy.
//
// Threading: one thread; TrainerContext is borrowed and must outlive the session.

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/checkpoint/checkpoint_manager.h"
#include "worker/trainer/data/loader/distributed_sampler.h"
#include "worker/trainer/data/loader/loader.h"
#include "worker/trainer/optim/lr_schedule.h"
#include "worker/trainer/pipeline/executor.h"
#include "worker/trainer/pipeline/stage_factory.h"
#include "worker/trainer/pipeline/subgroup_communicator.h"
#include "worker/trainer/session_support.h"
#include "worker/trainer/step/phase_timer.h"
#include "worker/trainer/trainer_options.h"
#include "worker/trainer/training_window.h"

namespace baton::trainer {

class PipelineSession {
 public:
  PipelineSession(const TrainerOptions& options, const TrainerContext& context);
  PipelineSession(const PipelineSession&) = delete;
  PipelineSession& operator=(const PipelineSession&) = delete;

  // INVALID_ARGUMENT for a world that is not a multiple of the stages, a batch that does not
  // split into the micro-batches or over the pipelines, a model that cannot be split, or a
  // dataset too small for one step.
  absl::Status Setup();
  // As TrainingSession::Restore, per stage; FAILED_PRECONDITION for checkpoints of another
  // number of stages.
  absl::Status Restore();
  // Errors: a step's (the executor's, UNAVAILABLE when a peer is gone), a save's.
  absl::StatusOr<TrainResult> Train();

 private:
  absl::Status BuildGroups();
  absl::Status BuildStage();
  absl::Status BuildData();
  absl::Status ApplyRestored(const RestoredCheckpoint& restored);
  absl::StatusOr<bool> StopRequested();
  absl::Status Step();
  // The whole model's gradient norm (collective over the pipeline), clipping when
  // max_grad_norm > 0.
  absl::StatusOr<double> ClipGlobalNorm();
  absl::Status CheckpointAndEmit();
  // `collective`: sum the last stages' loss over the world first (every rank must call it
  // at the same step), else this rank's own (NaN loss off the last stage).
  absl::Status Emit(bool collective);
  absl::Status Save();
  absl::StatusOr<TrainResult> Finish();

  const TrainerOptions& options_;
  const TrainerContext& context_;
  Communicator& comm_;  // The world.
  const Clock& clock_;
  const Dataset& train_;
  const c10::Device device_;
  const int world_;
  const int stages_;
  int replicas_ = 1;
  int stage_ = 0;
  int replica_ = 0;
  PhaseTimer phases_;

  // Setup.
  std::unique_ptr<pipeline::SubgroupCommunicator> pipeline_;       // rank == stage.
  std::unique_ptr<pipeline::SubgroupCommunicator> data_parallel_;  // Null for D = 1.
  pipeline::BuiltStage built_;
  std::vector<at::Tensor> params_;
  std::vector<at::Tensor> norm_params_;  // params_ less the last stage's tied copies.
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<pipeline::PipelineExecutor> executor_;
  pipeline::LossFn loss_;
  int64_t batch_ = 0;  // Per pipeline and step.
  std::optional<DistributedSampler> sampler_;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;
  int64_t global_batch_ = 0;  // batch_ * D.
  std::optional<LrSchedule> schedule_;

  // Restore.
  TrainResult result_;
  std::optional<CheckpointManager> checkpoints_;
  std::string stage_dir_;
  TrainingState state_;
  int64_t step_ = 0;
  LoaderPosition start_;

  // Train.
  std::unique_ptr<Loader> loader_;
  TrainingWindow window_;
  WindowPublisher publisher_;
  double lr_ = 0;
  int64_t epoch_ = 0;
  int64_t last_saved_ = -1;
};

}  // namespace baton::trainer
