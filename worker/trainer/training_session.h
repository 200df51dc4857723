#pragma once

// One run of the training loop (Trainer::Run; the behaviour is documented in trainer.h),
// as phases the caller runs in this order, each once:
//   Setup()    the micro-batch split, the model (seeded, moved to the device, broadcast from
//              rank 0), the optimizer, the sampler, the LR schedule and the step engine;
//   Restore()  with a snapshot_dir on every rank (collective; a rank without one turns
//              snapshots off for all): the newest in-memory snapshot any rank
//              holds when it is newer than the newest disk checkpoint's name says
//              (snapshot/snapshot_choice.h), sent by that rank to all, the disk not read;
//              else, with a checkpoint_dir, the newest valid checkpoint (and a snapshot
//              newer than that one when the newest file was corrupt); then the check that
//              every rank restored the same step, and rank 0's record of the generation's
//              start (which fences older generations off the directory);
//   Train()    the loader and sample log, then one Step() per optimizer step until the
//              budget, a stop or a checkpoint request; a checkpoint every checkpoint_every
//              steps (with snapshots, rank 0 writes it from the step's snapshot on a thread
//              of its own: training waits for the copy into memory only); an in-memory
//              snapshot by the writer ranks (TrainerContext::snapshot_writer) every
//              snapshot_every steps, or with snapshot_every 0 as often as keeps its cost
//              under 1 % (CPU) or 5 % (GPU, ZeRO) of the step time (every step when it is
//              cheaper; a failed snapshot is logged, not fatal: the disk checkpoints stay);
//              a metric line (Emit) every log_every steps and at the end, with the
//              evaluation on the last; then the final checkpoint and final.pt. A step that
//              fails because a peer is gone leaves a snapshot of the last completed step
//              on writer ranks (SnapshotOnPeerLoss).
// A phase that fails leaves the session unusable; its error is the run's (see
// Trainer::Run). LibTorch errors are thrown, not returned: the caller catches them.
//
// Threading: one thread; everything in TrainerContext is borrowed and must outlive the
// session. Options must have passed ValidateTrainerOptions.

#include <ATen/core/Tensor.h>
#include <torch/optim/optimizer.h>

#include <cstdint>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "worker/trainer/checkpoint/checkpoint_manager.h"
#include "worker/trainer/data/loader/distributed_sampler.h"
#include "worker/trainer/data/loader/loader.h"
#include "worker/trainer/device/host_staging.h"
#include "worker/trainer/models/model.h"
#include "worker/trainer/optim/lr_schedule.h"
#include "worker/trainer/session_support.h"
#include "worker/trainer/snapshot/async_snapshot_writer.h"
#include "worker/trainer/snapshot/snapshot_checkpointer.h"
#include "worker/trainer/snapshot/snapshot_interval.h"
#include "worker/trainer/snapshot/snapshot_store.h"
#include "worker/trainer/step/phase_timer.h"
#include "worker/trainer/step/train_step.h"
#include "worker/trainer/trainer_options.h"
#include "worker/trainer/training_window.h"
#include "worker/trainer/zero/zero_optimizer.h"

namespace baton::trainer {

class TrainingSession {
 public:
  TrainingSession(const TrainerOptions& options, const TrainerContext& context);
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  // Errors: INVALID_ARGUMENT for a global batch that does not split over the world size,
  // a model that does not fit the data, or a dataset too small for one optimizer step per
  // rank; UNAVAILABLE when the parameter broadcast fails.
  absl::Status Setup();
  // Errors: the checkpoint manager's (a checkpoint that cannot be restored,
  // FAILED_PRECONDITION when a newer generation has started in checkpoint_dir); ABORTED
  // when the ranks restored different steps; UNAVAILABLE when the check's collective fails.
  absl::Status Restore();
  // Errors: those of a step (the loader's, UNAVAILABLE from a collective), of a checkpoint
  // save and of the final weights; FAILED_PRECONDITION when the sample log cannot be
  // opened. A failed metric write is logged once and not fatal.
  absl::StatusOr<TrainResult> Train();

 private:
  // Setup.
  absl::Status SplitBatch();
  absl::Status BuildModel();
  absl::Status BuildSampler();
  absl::Status BuildSchedule();
  // Restore.
  absl::Status ApplyRestored(const RestoredCheckpoint& restored);
  // The snapshot part of Restore (collective; snapshots_ only): restores the newest
  // snapshot any rank holds that is newer than the disk checkpoint of disk_step and
  // disk_generation (0 and 0: none) and returns true; false when no rank has one or the
  // chosen one cannot be read (the state is then unchanged).
  absl::StatusOr<bool> RestoreSnapshot(int64_t disk_step, int64_t disk_generation);
  // Train.
  absl::Status OpenData();
  // Sets result_.stopped / result_.checkpointed. With zero_, rank 0's checkpoint request is
  // shared with every rank (collective): sharded state is saved by all ranks together.
  // UNAVAILABLE when that collective fails.
  absl::StatusOr<bool> StopRequested();
  absl::Status Step();
  absl::Status MicroBatch();
  void LogStepSamples();
  void CountStep(const StepOutcome& outcome);
  absl::Status CheckpointAndEmit();
  // The snapshot after a step of `step_time` (`overlapped`: a snapshot copy was in flight
  // during it), when one is due (writer ranks only; with ZeRO every rank takes part, see
  // MaybeSnapshotSharded): started, its copy overlapping the next step's forward and
  // backward. UNAVAILABLE when ZeRO's export fails (a peer is gone); a snapshot that fails
  // is logged, not an error.
  absl::Status MaybeSnapshot(absl::Duration step_time, bool overlapped);
  absl::Status MaybeSnapshotSharded(absl::Duration step_time, bool overlapped);
  // Whether a periodic snapshot is due at step_, the last one taken at step `last` (-1:
  // none yet); counts the due ones for the measuring skip at an interval of 1.
  bool SnapshotDue(int64_t last);
  // How many ranks pass `mine` true (collective: one all-reduce).
  absl::StatusOr<int> RanksWhere(bool mine);
  // Adds a step of `step_time` to the moving averages (`overlapped`: with a snapshot copy in
  // flight); whether it was a sample of a step with a copy.
  bool SampleStepTime(absl::Duration step_time, bool overlapped);
  // The writer, opened at the first snapshot: false when snapshots are off or ended.
  bool OpenSnapshotWriter();
  // Plans the image of the state at step_ (`next`: the data position after it) and starts
  // its copy; false when planning failed, which ends snapshots.
  bool StartSnapshot(const LoaderPosition& next, bool for_checkpoint);
  // step_start_ for the step about to run (snapshot writer ranks).
  void RecordStepStart();
  // After a step failed with `status`; returns it. When a peer was lost (UNAVAILABLE: a
  // collective failed) on a snapshot writer rank on the CPU (a GPU's stream may hold a
  // collective that never completes, which a copy would wait for) without ZeRO (a lost
  // rank's optimizer shard is gone with it), this process holds the state of step_: the
  // step in flight failed before its update (its collectives all precede it), so what it
  // changed before (data position, generators, buffers) is put back from step_start_ and
  // the state snapshotted, synchronously, unless the newest snapshot is of step_ already.
  // The next generation restores it: a survivor loses no completed step to its peer's
  // loss, whatever the snapshot interval.
  absl::Status SnapshotOnPeerLoss(absl::Status status);
  // snapshot_interval_ from the measured costs (see MaybeSnapshot).
  void UpdateSnapshotInterval();
  SnapshotCosts MeasuredSnapshotCosts() const;
  // Sets snapshot_interval_, logging a change (chosen for `budget`) now and then.
  void SetSnapshotInterval(int64_t interval, double budget);
  // Waits for the snapshot copy in flight (before anything changes the parameters or the
  // optimizer state); a failed one is logged and ends snapshots.
  void FenceSnapshot();
  // state_.progress for the state at step_, `next` the data position after it (checkpoints
  // and snapshots).
  void FillProgress(const LoaderPosition& next);
  void Emit(std::optional<double> eval_accuracy);
  // Tells the progress tracker (when there is one) that `phase` begins.
  void Mark(TrainingPhase phase);
  // A data epoch boundary begins (and takes TrainerContext::fault_epoch_delay longer).
  void BeginEpoch();
  absl::Status Save();
  absl::Status WriteCheckpoint();  // Rank 0's part of Save.
  void TraceStep(int64_t step);
  void TraceWritten(const absl::StatusOr<std::optional<std::string>>& written);
  absl::StatusOr<TrainResult> Finish();
  // Accuracy on the test split, identical on every rank (collective).
  absl::StatusOr<double> Evaluate();

  const TrainerOptions& options_;
  const TrainerContext& context_;
  Communicator& comm_;
  const Clock& clock_;
  const Dataset& train_;
  const c10::Device device_;
  const int world_;
  PhaseTimer phases_;  // Of the current step.

  // Setup.
  int64_t batch_size_ = 0;  // Per-rank micro-batch.
  TrainStepOptions step_options_;
  int64_t accumulation_ = 1;  // Micro-batches per optimizer step.
  std::unique_ptr<Model> model_;
  std::vector<at::Tensor> params_;
  NamedTensors named_;  // Parameters, then buffers.
  std::vector<at::Tensor> buffers_;
  // Stage 0: updates the parameters. ZeRO stage 1: zero_'s reference optimizer (zero_grad,
  // the lr, and the optimizer of checkpoints; state only while saving or restoring).
  std::unique_ptr<torch::optim::Optimizer> optimizer_;
  std::unique_ptr<ZeroOptimizer> zero_;  // ZeRO stage 1 on more than one rank; else null.
  std::optional<DistributedSampler> sampler_;
  int64_t micro_per_epoch_ = 0;
  int64_t steps_per_epoch_ = 0;
  int64_t total_steps_ = 0;   // The step budget.
  int64_t global_batch_ = 0;  // batch_size * accumulation * world.
  std::optional<LrSchedule> schedule_;
  std::unique_ptr<TrainStep> train_step_;

  // Restore.
  TrainResult result_;
  std::optional<CheckpointManager> checkpoints_;  // Set with a checkpoint_dir.
  TrainingState state_;
  int64_t step_ = 0;  // Optimizer steps done (global).
  // Snapshots: taken (and read at restore) when a snapshot_dir is given, snapshot_every is
  // not -1 and the optimizer is not sharded (ZeRO's shards are not snapshotted yet).
  bool snapshots_ = false;
  // A GPU writer rank's copies to pinned host memory (made at its first snapshot). Declared
  // before the writer, whose copy in flight waits for them: destroyed after it.
  std::unique_ptr<HostStaging> staging_;
  // Writer ranks only; null after a failure.
  std::unique_ptr<AsyncSnapshotWriter> snapshot_writer_;
  // Rank 0 with snapshots and a checkpoint_dir: each checkpoint step's snapshot is written
  // to disk from its bytes on the checkpointer's thread (created with the first).
  std::unique_ptr<SnapshotCheckpointer> checkpointer_;
  bool snapshot_for_checkpoint_ = false;  // The snapshot in flight is for a checkpoint.
  bool checkpoint_owed_ = false;          // Its snapshot failed: save at the next step boundary.
  absl::Status checkpoint_status_;        // Of handing a snapshot to the checkpointer.
  int64_t snapshot_interval_ = 1;         // Steps between snapshots (adapted for snapshot_every 0).
  int64_t last_snapshot_ = -1;            // Step of the last snapshot started.
  int64_t snapshots_written_ = 0;
  // ZeRO: snapshots are taken by the whole gang (agreed at Restore), and the step of the
  // last one the gang took (whether or not this rank's copy was written).
  bool sharded_snapshots_ = false;
  int64_t last_sharded_snapshot_ = -1;
  int64_t snapshots_due_ = 0;
  int64_t snapshot_logged_ = 0;  // Step of the last interval log line.
  size_t snapshot_bytes_ = 0;    // Of the last snapshot.
  // Moving averages (snapshot_every 0): every step; steps without and with a snapshot copy
  // in flight; planning a snapshot; a copy's own time.
  absl::Duration step_time_;
  absl::Duration clean_step_time_;
  absl::Duration copy_step_time_;
  absl::Duration snapshot_plan_time_;
  absl::Duration snapshot_copy_time_;
  LoaderPosition start_;  // Where this run's data starts.
  // What a step changes before its update, as it was when the step in flight started.
  struct StepStart {
    LoaderPosition position;
    at::Tensor rng_cpu;
    std::vector<at::Tensor> rng_cuda;
    std::vector<at::Tensor> buffers;  // Copies of buffers_ (forward changes BatchNorm's).
  };
  StepStart step_start_;

  // Train.
  std::unique_ptr<Loader> loader_;
  TrainingWindow window_;
  WindowPublisher publisher_;
  double lr_ = 0;            // Of the current step.
  int64_t epoch_ = 0;        // Of the current step.
  int64_t last_saved_ = -1;  // Step of the last checkpoint saved.
  std::ofstream sample_log_;
  std::string step_samples_;   // This step's sample ids, comma-separated.
  int64_t logged_epoch_ = -1;  // Epoch of epoch_indices_.
  std::vector<int64_t> epoch_indices_;
};

}  // namespace baton::trainer
