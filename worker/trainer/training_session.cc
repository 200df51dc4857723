#include "worker/trainer/training_session.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/logging.h"
#include "common/private_file.h"
#include "common/spec/global_batch.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"
#include "worker/trainer/checkpoint/checkpoint_codec.h"
#include "worker/trainer/contract/contract.h"
#include "worker/trainer/device/device.h"
#include "worker/trainer/device/precision.h"
#include "worker/trainer/pipeline/checkpoint_layout.h"
#include "worker/trainer/profile/profiler.h"
#include "worker/trainer/session_support.h"
#include "worker/trainer/snapshot/async_snapshot_writer.h"
#include "worker/trainer/snapshot/snapshot_checkpointer.h"
#include "worker/trainer/snapshot/snapshot_choice.h"
#include "worker/trainer/snapshot/snapshot_codec.h"
#include "worker/trainer/step/gradient_reducer.h"

namespace baton::trainer {
namespace {

namespace ts = ::baton::trainer_spec;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// Where a rank resumes in its data stream after restoring `progress` saved by a gang of
// progress.world_size ranks: the same position when the world size is unchanged, else
// the same fraction of the epoch, rounded down to a whole optimizer step.
LoaderPosition ResumePosition(const TrainingProgress& progress, int world_size,
                              int64_t micro_per_epoch, int64_t accumulation_steps,
                              int64_t saved_micro_per_epoch) {
  LoaderPosition position{progress.epoch, progress.batch_in_epoch};
  if (progress.world_size != world_size && saved_micro_per_epoch > 0) {
    const double fraction =
        static_cast<double>(progress.batch_in_epoch) / static_cast<double>(saved_micro_per_epoch);
    position.batch_in_epoch = static_cast<int64_t>(fraction * micro_per_epoch);
  }
  position.batch_in_epoch -= position.batch_in_epoch % accumulation_steps;
  if (position.batch_in_epoch + accumulation_steps > micro_per_epoch) {
    position = {position.epoch + 1, 0};
  }
  return position;
}

// ZeRO with snapshot_every 0: how often the ranks agree on the snapshot interval.
constexpr int64_t kIntervalAgreementSteps = 50;

// A moving average (the snapshot interval's inputs): the first sample, then 4:1.
void Average(absl::Duration& average, absl::Duration sample) {
  average = average == absl::ZeroDuration() ? sample : (average * 4 + sample) / 5;
}

}  // namespace

TrainingSession::TrainingSession(const TrainerOptions& options, const TrainerContext& context)
    : options_(options),
      context_(context),
      comm_(*context.comm),
      clock_(*context.clock),
      train_(*context.train),
      device_(context.comm->device()),
      world_(context.comm->world_size()),
      phases_(*context.clock) {
  result_.first_loss = result_.loss = result_.accuracy = kNaN;
}

// ---- setup ------------------------------------------------------------------------------

absl::Status TrainingSession::Setup() {
  RETURN_IF_ERROR(SplitBatch());
  RETURN_IF_ERROR(BuildModel());
  RETURN_IF_ERROR(BuildSampler());
  return BuildSchedule();
}

// With a global batch the micro-batch and accumulation follow from the world size.
absl::Status TrainingSession::SplitBatch() {
  batch_size_ = options_.batch_size;
  step_options_ = options_.step;
  if (options_.global_batch > 0) {
    ASSIGN_OR_RETURN(const GlobalBatchSplit split,
                     SplitGlobalBatch(options_.global_batch, world_, options_.batch_size));
    batch_size_ = split.micro_batch;
    step_options_.accumulation_steps = split.accumulation_steps;
    if (comm_.rank() == 0) {
      *context_.log << "global batch " << options_.global_batch << " = " << world_ << " ranks x "
                    << split.accumulation_steps << " micro-batches x " << batch_size_ << std::endl;
    }
  }
  accumulation_ = step_options_.accumulation_steps;
  return absl::OkStatus();
}

// The model, identical on every rank, and its optimizer.
absl::Status TrainingSession::BuildModel() {
  ModelOptions model_options = options_.model;
  model_options.seed = options_.seed;
  ASSIGN_OR_RETURN(model_, MakeModel(model_options, train_.info()));
  model_->To(device_);
  model_->Train(true);
  params_ = model_->Parameters();
  named_ = model_->NamedParameters();
  for (auto& buffer : model_->NamedBuffers()) {
    buffers_.push_back(buffer.second);
    named_.push_back(std::move(buffer));
  }
  {
    std::vector<at::Tensor> all;
    for (const auto& [name, tensor] : named_) all.push_back(tensor);
    RETURN_IF_ERROR(BroadcastParameters(all, /*root=*/0, comm_));
  }
  ASSIGN_OR_RETURN(optimizer_, MakeOptimizer(params_, options_.optimizer));
  if (options_.zero_stage >= 1 && world_ > 1) {
    ZeroOptions zero;
    zero.stage = options_.zero_stage;
    zero.offload_optimizer = options_.zero_offload_optimizer;
    // Stage 2 shards each gradient bucket: the segments are the reducer's buckets.
    if (zero.stage == 2) {
      zero.segments = GradientBuckets(params_, step_options_.reducer.bucket_cap_mb);
    }
    ASSIGN_OR_RETURN(zero_,
                     ZeroOptimizer::Create(params_, options_.optimizer, *optimizer_, comm_, zero));
    if (comm_.rank() == 0) {
      *context_.log << "zero stage " << zero.stage << ": each of " << world_ << " ranks updates "
                    << zero_->shard_numel() << " of " << zero_->total_numel()
                    << " parameter elements"
                    << (zero.stage == 2 ? " and keeps only their gradients" : "") << std::endl;
      if (zero.offload_optimizer && !zero_->offloading()) {
        *context_.log << ts::FlagLabel(ts::kZeroOffloadOptimizer)
                      << ": training on the CPU, the optimizer state is in host memory "
                         "already; nothing to offload"
                      << std::endl;
      }
    }
  } else if (options_.zero_stage >= 1 && comm_.rank() == 0) {
    *context_.log << "zero stage " << options_.zero_stage
                  << ": a world of one rank has nothing to shard; training as stage 0" << std::endl;
  }
  return absl::OkStatus();
}

// The sampler, and the steps an epoch and the budget have.
absl::Status TrainingSession::BuildSampler() {
  ASSIGN_OR_RETURN(sampler_, options_.global_batch > 0
                                 ? DistributedSampler::CreateForGlobalBatch(
                                       train_.size(), comm_.rank(), world_, batch_size_,
                                       options_.global_batch, options_.seed)
                                 : DistributedSampler::Create(train_.size(), comm_.rank(), world_,
                                                              batch_size_, options_.seed));
  micro_per_epoch_ = sampler_->batches_per_epoch();
  steps_per_epoch_ = micro_per_epoch_ / accumulation_;
  if (steps_per_epoch_ == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the dataset (", train_.size(), " samples) gives each of ", world_, " ranks ",
                     micro_per_epoch_, " batches of ", batch_size_, " per epoch, fewer than ",
                     ts::FlagLabel(ts::kAccumulationSteps), "=", accumulation_));
  }
  total_steps_ = BudgetSteps(options_, steps_per_epoch_);
  global_batch_ = batch_size_ * accumulation_ * world_;
  return absl::OkStatus();
}

// The LR schedule over the budget, and the step engine.
absl::Status TrainingSession::BuildSchedule() {
  ASSIGN_OR_RETURN(schedule_, MakeLrSchedule(options_, total_steps_, global_batch_));
  ASSIGN_OR_RETURN(train_step_, TrainStep::Create(params_, *optimizer_, comm_, clock_,
                                                  step_options_, zero_.get()));
  if (!train_step_->precision().note.empty() && comm_.rank() == 0) {
    BATON_LOG(WARNING) << train_step_->precision().note;
  }
  if (train_step_->reducer().compression_emulated() && comm_.rank() == 0) {
    BATON_LOG(WARNING) << ts::FlagLabel(ts::kGradCompression) << ": the " << comm_.backend()
                       << " backend cannot sum 16-bit values of that type; gradients are "
                          "rounded to it and summed in float32";
  }
  return absl::OkStatus();
}

// ---- restore ----------------------------------------------------------------------------

absl::Status TrainingSession::Restore() {
  state_.tensors = named_;
  state_.optimizer = optimizer_.get();
  snapshots_ = !context_.snapshot_dir.empty() && options_.snapshot_every != -1;
  if (options_.snapshot_every != -1 && world_ > 1) {
    // Restoring a snapshot is collective (and, with ZeRO, taking one): on every rank or none.
    ASSIGN_OR_RETURN(const int with_snapshots, RanksWhere(snapshots_));
    const bool everywhere = with_snapshots == world_;
    if (snapshots_ && !everywhere && comm_.rank() == 0) {
      *context_.log << "in-memory snapshots are off: not every rank has a snapshot directory "
                       "(its worker has no --snapshot_root)"
                    << std::endl;
    }
    snapshots_ = everywhere;
  }
  sharded_snapshots_ = snapshots_ && zero_ != nullptr;
  if (options_.snapshot_every > 0) snapshot_interval_ = options_.snapshot_every;
  // The newest disk checkpoint, by its name: a newer in-memory snapshot is restored without
  // reading it (at a large model's scale, the disk read would be most of the recovery).
  std::optional<CheckpointFile> newest_on_disk;
  if (!options_.checkpoint_dir.empty()) {
    // A pipeline run's checkpoints (per stage) do not restore without pipeline.
    RETURN_IF_ERROR(pipeline::CheckCheckpointLayout(options_.checkpoint_dir, /*stages=*/1));
    ASSIGN_OR_RETURN(CheckpointManager manager,
                     MakeCheckpointManager(options_, context_, options_.checkpoint_dir));
    checkpoints_.emplace(std::move(manager));
    ASSIGN_OR_RETURN(newest_on_disk, checkpoints_->NewestRestorable());
  }
  bool from_memory = false;
  if (snapshots_) {
    ASSIGN_OR_RETURN(from_memory,
                     RestoreSnapshot(newest_on_disk.has_value() ? newest_on_disk->step : 0,
                                     newest_on_disk.has_value() ? newest_on_disk->generation : 0));
  }
  if (!from_memory && checkpoints_.has_value()) {
    absl::StatusOr<RestoredCheckpoint> restored = checkpoints_->RestoreLatest(state_);
    if (restored.ok()) {
      RETURN_IF_ERROR(ApplyRestored(*restored));
    } else if (restored.status().code() != absl::StatusCode::kNotFound) {
      return restored.status();
    }
    // The newest file was corrupt and an older one loaded: a snapshot may be newer than that.
    if (snapshots_ && newest_on_disk.has_value() && step_ < newest_on_disk->step) {
      ASSIGN_OR_RETURN(from_memory,
                       RestoreSnapshot(step_, restored.ok() ? restored->generation : 0));
    }
  }
  // A checkpoint or snapshot holds the unsharded optimizer state (whatever stage and world
  // size saved it): each rank keeps its shard's cut of it.
  if (zero_ != nullptr) RETURN_IF_ERROR(zero_->ImportState());
  if (snapshots_ && !from_memory && comm_.rank() == 0) {
    *context_.log << "no in-memory snapshot newer than step " << step_
                  << " on any rank: resuming from "
                  << (result_.restored_from.empty() ? "the start" : result_.restored_from)
                  << std::endl;
  }
  if (checkpoints_.has_value() || snapshots_) {
    RETURN_IF_ERROR(CheckRanksAgreeOnStep(comm_, step_, device_, "ranks"));
  }
  if (checkpoints_.has_value()) {
    // From here on older generations' writers are fenced off the directory; if a newer
    // generation has started already, this one is superseded and must not train.
    if (comm_.rank() == 0) RETURN_IF_ERROR(checkpoints_->RecordStart(step_));
  }
  result_.steps = step_;
  return absl::OkStatus();
}

absl::StatusOr<int> TrainingSession::RanksWhere(bool mine) {
  at::Tensor count =
      at::full({1}, mine ? 1.0 : 0.0, at::TensorOptions().dtype(at::kFloat).device(device_));
  RETURN_IF_ERROR(comm_.AllReduceSum(count));
  return static_cast<int>(std::lround(count.cpu().item<float>()));
}

// Every rank offers the newest snapshot it can read that is newer than the disk's; the
// chosen rank reads it and broadcasts its bytes (size first: 0 when its read failed), and
// every rank applies the same bytes.
absl::StatusOr<bool> TrainingSession::RestoreSnapshot(int64_t disk_step, int64_t disk_generation) {
  std::optional<SnapshotRef> mine;
  for (const SnapshotRef& ref : ListSnapshots(context_.snapshot_dir)) {
    if (NewerThanDisk(ref.generation, ref.step, disk_step, disk_generation)) {
      mine = ref;
      break;
    }
  }
  const auto on_device = at::TensorOptions().dtype(at::kLong).device(device_);
  at::Tensor offer = at::tensor({mine.has_value() ? mine->generation : int64_t{-1},
                                 mine.has_value() ? mine->step : int64_t{0}},
                                at::kLong)
                         .to(device_);
  at::Tensor offers = at::empty({2 * world_}, on_device);
  RETURN_IF_ERROR(comm_.AllGather(offer, offers));
  offers = offers.cpu();
  std::vector<SnapshotOffer> all;
  for (int r = 0; r < world_; ++r) {
    all.push_back({r, offers[2 * r].item<int64_t>(), offers[2 * r + 1].item<int64_t>()});
  }
  const std::optional<SnapshotOffer> choice = ChooseSnapshot(all, disk_step, disk_generation);
  if (!choice.has_value()) return false;
  std::string bytes;
  if (comm_.rank() == choice->rank) {
    absl::StatusOr<std::string> read = ReadSnapshot(*mine);
    if (read.ok()) {
      bytes = *std::move(read);
    } else {
      BATON_LOG(WARNING) << "cannot read the in-memory snapshot of step " << mine->step << ": "
                         << read.status();
    }
  }
  at::Tensor size = at::full({1}, static_cast<int64_t>(bytes.size()), on_device);
  RETURN_IF_ERROR(comm_.Broadcast(size, choice->rank));
  const int64_t n = size.cpu().item<int64_t>();
  if (n == 0) {
    if (comm_.rank() == 0) {
      *context_.log << "rank " << choice->rank << " could not read its in-memory snapshot of step "
                    << choice->step << std::endl;
    }
    return false;
  }
  at::Tensor buffer = at::empty({n}, at::kByte);
  if (comm_.rank() == choice->rank) std::memcpy(buffer.data_ptr(), bytes.data(), bytes.size());
  buffer = buffer.to(device_);
  RETURN_IF_ERROR(comm_.Broadcast(buffer, choice->rank));
  buffer = buffer.cpu();
  ASSIGN_OR_RETURN(
      const DecodedCheckpoint decoded,
      DecodeSnapshot(absl::string_view(static_cast<const char*>(buffer.data_ptr()), n)));
  RETURN_IF_ERROR(ApplyCheckpoint(decoded, state_, /*restore_rng=*/true));
  RestoredCheckpoint restored;
  restored.path = absl::StrCat("in-memory snapshot of generation ", choice->generation, " (rank ",
                               choice->rank, "'s copy)");
  restored.step = choice->step;
  restored.generation = choice->generation;
  RETURN_IF_ERROR(ApplyRestored(restored));
  return true;
}

// The step, loss scale and data position of a restored checkpoint.
absl::Status TrainingSession::ApplyRestored(const RestoredCheckpoint& restored) {
  const TrainingProgress& p = state_.progress;
  step_ = p.step;
  result_.restored_from = restored.path;
  // A scale of 1 means the saving run had no loss scaling: keep the initial scale.
  if (train_step_->scaler().enabled() && p.scaler_scale > 0 && p.scaler_scale != 1.0) {
    RETURN_IF_ERROR(train_step_->mutable_scaler().Restore(p.scaler_scale, p.scaler_growth_tracker));
  }
  // Micro-batches per epoch of the gang that saved it (same dataset and batch size).
  const int64_t saved_micro =
      p.world_size > 0 ? (train_.size() / p.world_size) / batch_size_ : micro_per_epoch_;
  // With a global batch every step consumed the same samples whatever the world size, so
  // the position follows from the step count alone, exactly.
  start_ = options_.global_batch > 0
               ? LoaderPosition{step_ / steps_per_epoch_, step_ % steps_per_epoch_ * accumulation_}
               : ResumePosition(p, world_, micro_per_epoch_, accumulation_, saved_micro);
  *context_.log << "restored " << restored.path << " at step " << step_ << " (epoch "
                << start_.epoch << ", batch " << start_.batch_in_epoch << ")" << std::endl;
  return absl::OkStatus();
}

// ---- train ------------------------------------------------------------------------------

absl::StatusOr<TrainResult> TrainingSession::Train() {
  RETURN_IF_ERROR(OpenData());
  while (step_ < total_steps_) {
    ASSIGN_OR_RETURN(const bool stop, StopRequested());
    if (stop) break;
    TraceStep(step_ + 1);
    const bool overlapped = snapshot_writer_ != nullptr && snapshot_writer_->in_flight();
    const absl::Time step_start = clock_.Now();
    if (absl::Status stepped = Step(); !stepped.ok()) return SnapshotOnPeerLoss(stepped);
    RETURN_IF_ERROR(MaybeSnapshot(clock_.Now() - step_start, overlapped));
    RETURN_IF_ERROR(CheckpointAndEmit());
    TraceWritten(context_.profiler != nullptr ? context_.profiler->AfterStep(step_)
                                              : std::optional<std::string>());
  }
  absl::StatusOr<TrainResult> result = Finish();
  if (context_.profiler != nullptr) TraceWritten(context_.profiler->Finish());
  return result;
}

// Step profiling (profile/profiler.h): the phases and the buckets' all-reduces of `step`
// are recorded when it is in a requested window.
void TrainingSession::TraceStep(int64_t step) {
  TraceRecorder* trace =
      context_.profiler != nullptr ? context_.profiler->BeforeStep(step) : nullptr;
  phases_.SetTrace(trace, step);
  train_step_->SetTrace(trace, &clock_, step);
}

void TrainingSession::TraceWritten(const absl::StatusOr<std::optional<std::string>>& written) {
  if (!written.ok()) {
    BATON_LOG(WARNING) << "profile trace lost: " << written.status();
  } else if (written->has_value()) {
    *context_.log << "profile: " << **written << std::endl;
  }
}

// The loader from the restored position, the first window and the sample log.
absl::Status TrainingSession::OpenData() {
  ASSIGN_OR_RETURN(loader_, OpenLoader(options_, train_, *sampler_, device_, start_, clock_));
  lr_ = schedule_->LrAt(step_);
  window_ = NewWindow(device_, clock_.Now());
  ResetPeakMemory(device_);
  epoch_ = start_.epoch;
  if (!options_.sample_log.empty()) {
    const std::string path = absl::StrCat(options_.sample_log, ".", comm_.rank());
    // Created 0600 and never through a symlink (the stream below then opens the file
    // this made or checked).
    const int fd = OpenPrivate(path, O_WRONLY | O_CREAT | O_APPEND);
    if (fd >= 0) {
      ::close(fd);
      sample_log_.open(path, std::ios::app);
    }
    if (fd < 0 || !sample_log_) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot append to ", ts::FlagLabel(ts::kSampleLog), " file ", path));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<bool> TrainingSession::StopRequested() {
  RETURN_IF_ERROR(CheckLease(context_.lease));
  if (context_.stop != nullptr && context_.stop->load()) {
    result_.stopped = true;
    return true;
  }
  bool checkpoint = context_.checkpoint_request != nullptr && context_.checkpoint_request->load() &&
                    comm_.rank() == 0;
  if (zero_ != nullptr && context_.checkpoint_request != nullptr) {
    ASSIGN_OR_RETURN(const int requested, RanksWhere(checkpoint));
    checkpoint = requested > 0;
  }
  if (checkpoint) result_.checkpointed = true;
  return checkpoint;
}

// One optimizer step: accumulation_ micro-batches, then the all-reduce wait and update.
// The phase timer charges everything in between to a phase: the epoch seek and the LR to
// data, the window's sums to backward, the sample log to optimizer.
absl::Status TrainingSession::Step() {
  if (snapshots_ && !context_.snapshot_writer.empty() && !device_.is_cuda() && zero_ == nullptr) {
    RecordStepStart();
  }
  Mark(TrainingPhase::kStep);
  if (context_.fault_hang_step == step_ + 1 && context_.fault_hang_rank == comm_.rank()) {
    BATON_LOG(WARNING) << "fault injection: the training thread blocks before step " << step_ + 1
                       << " (" << kEnvFaultHang << ")";
    while (true) absl::SleepFor(absl::Hours(1));
  }
  phases_.Start();
  // An epoch's leftover micro-batches (fewer than one step's worth) are not used.
  if (loader_->position().batch_in_epoch + accumulation_ > micro_per_epoch_) {
    BeginEpoch();
    RETURN_IF_ERROR(loader_->Seek({loader_->position().epoch + 1, 0}));
    Mark(TrainingPhase::kStep);
  }
  epoch_ = loader_->position().epoch;
  lr_ = schedule_->LrAt(step_);
  SetLearningRate(*optimizer_, lr_);
  for (int64_t m = 0; m < accumulation_; ++m) RETURN_IF_ERROR(MicroBatch());
  // Logged as soon as the gradients' exchange completed: a step that completed on the
  // survivors (which a snapshot may resume right after) is logged by every rank but one
  // killed within microseconds of the exchange; a step still in flight is not logged.
  // The snapshot copy started after the last step ends before this update changes its source.
  ASSIGN_OR_RETURN(const StepOutcome outcome, train_step_->Finish([this] {
    LogStepSamples();
    FenceSnapshot();
  }));
  phases_.LapSplit(Phase::kCommWait, outcome.comm_wait, Phase::kOptimizer);
  window_.time += phases_.Stop();
  CountStep(outcome);
  return absl::OkStatus();
}

// One micro-batch: the next batch, forward under autocast, backward.
absl::Status TrainingSession::MicroBatch() {
  std::optional<Batch> batch;
  LoaderPosition at;
  for (int attempt = 0; attempt < 2 && !batch.has_value(); ++attempt) {
    if (attempt > 0) BeginEpoch();
    at = loader_->position();
    ASSIGN_OR_RETURN(batch, loader_->Next());  // nullopt once at an epoch's end.
    if (attempt > 0) Mark(TrainingPhase::kStep);
  }
  if (!batch.has_value()) return absl::InternalError("the loader returned no batch");
  if (sample_log_.is_open()) {
    if (logged_epoch_ != at.epoch) {
      epoch_indices_ = sampler_->EpochIndices(at.epoch);
      logged_epoch_ = at.epoch;
    }
    for (int64_t k = 0; k < batch_size_; ++k) {
      absl::StrAppend(&step_samples_, step_samples_.empty() ? "" : ",",
                      epoch_indices_[at.batch_in_epoch * batch_size_ + k]);
    }
  }
  const bool timing_sync = options_.step.synchronize_for_timing;
  phases_.Lap(Phase::kData);
  StepOutput out;
  {
    AutocastScope autocast(train_step_->precision());
    out = model_->Forward(*batch);
  }
  if (timing_sync) SynchronizeDevice(device_);
  phases_.Lap(Phase::kForward);
  RETURN_IF_ERROR(train_step_->Backward(out.loss));
  if (timing_sync) SynchronizeDevice(device_);
  window_.loss_sum += out.loss.detach().to(at::kDouble);
  window_.correct += out.correct;
  window_.count += out.count;
  window_.samples += batch->input.size(0);
  ++window_.micro_batches;
  phases_.Lap(Phase::kBackward);
  return absl::OkStatus();
}

// "<generation> <step> <rank> <ids>" for the step whose gradients were just exchanged,
// flushed: a crash loses no completed step's line.
void TrainingSession::LogStepSamples() {
  if (!sample_log_.is_open()) return;
  sample_log_ << context_.generation << " " << step_ + 1 << " " << comm_.rank() << " "
              << step_samples_ << std::endl;
  step_samples_.clear();
}

void TrainingSession::CountStep(const StepOutcome& outcome) {
  ++step_;
  ++window_.steps;
  if (outcome.skipped) {
    ++window_.skipped;
    ++result_.skipped_steps;
  } else {
    ++window_.applied;
    window_.grad_norm_sum += outcome.grad_norm;
  }
  result_.steps = step_;
  result_.epoch = epoch_;
  if (context_.progress != nullptr) context_.progress->StepDone(step_);
}

void TrainingSession::Mark(TrainingPhase phase) {
  if (context_.progress != nullptr) context_.progress->Begin(phase);
}

void TrainingSession::BeginEpoch() {
  Mark(TrainingPhase::kEpoch);
  if (context_.fault_epoch_delay > absl::ZeroDuration()) absl::SleepFor(context_.fault_epoch_delay);
}

// After a step: the periodic checkpoint, then the metric line when one is due (with the
// evaluation after the last step).
absl::Status TrainingSession::CheckpointAndEmit() {
  if (checkpointer_ != nullptr) RETURN_IF_ERROR(checkpointer_->Poll());
  RETURN_IF_ERROR(std::exchange(checkpoint_status_, absl::OkStatus()));
  if (checkpoints_.has_value() && (checkpoints_->ShouldSave(step_) || checkpoint_owed_)) {
    // From the snapshot of this step when one is being copied for it (handed to the
    // checkpointer by FenceSnapshot, once copied); else now, synchronously.
    if (!snapshot_for_checkpoint_ || last_snapshot_ != step_) {
      Mark(TrainingPhase::kCheckpoint);
      RETURN_IF_ERROR(Save());
    }
    checkpoint_owed_ = false;
    last_saved_ = step_;
  }
  const bool last = step_ == total_steps_;
  const bool evaluate = context_.test != nullptr &&
                        (last || (options_.eval_every > 0 && step_ % options_.eval_every == 0));
  if (step_ % options_.log_every != 0 && !last && !evaluate) return absl::OkStatus();
  std::optional<double> eval_accuracy;
  if (evaluate) {
    Mark(TrainingPhase::kEval);
    const absl::Time eval_start = clock_.Now();
    // Running statistics (BatchNorm) come from each rank's own batches: evaluate with
    // rank 0's everywhere, the ones final.pt holds.
    RETURN_IF_ERROR(BroadcastParameters(buffers_, /*root=*/0, comm_));
    ASSIGN_OR_RETURN(eval_accuracy, Evaluate());
    result_.eval_accuracy = eval_accuracy;
    window_.start += clock_.Now() - eval_start;  // Not training time.
  }
  Emit(eval_accuracy);
  return absl::OkStatus();
}

// Writes the metric line and the log line of the window, then starts a new window.
void TrainingSession::Emit(std::optional<double> eval_accuracy) {
  WindowFacts facts;
  facts.now = clock_.Now();
  facts.step = step_;
  facts.epoch = epoch_;
  facts.total_steps = total_steps_;
  facts.world_size = world_;
  facts.lr = lr_;
  facts.tokens_per_sample = TokensPerSample(train_.info());
  facts.comm_bytes = static_cast<double>(train_step_->reducer().bytes_per_sync());
  if (train_step_->scaler().enabled()) facts.loss_scale = train_step_->scaler().scale();
  facts.memory = MemoryStats(device_);
  facts.eval_accuracy = eval_accuracy;
  publisher_.Publish(ReportWindow(window_, facts), *context_.metrics, *context_.log, result_);
  window_ = NewWindow(device_, clock_.Now());
  ResetPeakMemory(device_);
}

// Rank 0 saves the training state at step_ (no-op without a checkpoint_dir). With zero_
// every rank must call it: the optimizer state is gathered to rank 0 first (collective).
absl::Status TrainingSession::Save() {
  if (!checkpoints_.has_value()) return absl::OkStatus();
  if (zero_ == nullptr) return WriteCheckpoint();
  RETURN_IF_ERROR(zero_->ExportState(/*keep=*/comm_.rank() == 0));
  const absl::Status written = WriteCheckpoint();
  zero_->ClearExportedState();
  return written;
}

void TrainingSession::FillProgress(const LoaderPosition& next) {
  state_.progress.step = step_;
  state_.progress.epoch = next.epoch;
  state_.progress.batch_in_epoch = next.batch_in_epoch;
  state_.progress.samples_seen = step_ * global_batch_;
  state_.progress.world_size = world_;
  state_.progress.scaler_scale = train_step_->scaler().scale();
  state_.progress.scaler_growth_tracker = train_step_->scaler().growth_tracker();
}

// Opens the writer at the first snapshot. Plans the image (progress, RNG, the buffers
// cloned: forward changes BatchNorm's) and starts its copy, which the next step's forward
// and backward overlap; FenceSnapshot waits for it before the update.
//
// The interval for snapshot_every 0: snapshot/snapshot_interval.h, from moving averages of
// the step times with and without a copy in flight and of the snapshots' costs. A snapshot
// taken on losing a peer (SnapshotOnPeerLoss) covers a survivor's last steps whatever the
// interval. At an interval of 1 every 100th snapshot is skipped so that steps without a
// copy stay measured.
absl::Status TrainingSession::MaybeSnapshot(absl::Duration step_time, bool overlapped) {
  if (zero_ != nullptr) return MaybeSnapshotSharded(step_time, overlapped);
  if (!snapshots_ || context_.snapshot_writer.empty()) return absl::OkStatus();
  if (SampleStepTime(step_time, overlapped)) UpdateSnapshotInterval();
  // Rank 0 snapshots every checkpoint step: the disk checkpoint is written from it.
  const bool for_checkpoint =
      comm_.rank() == 0 && checkpoints_.has_value() && checkpoints_->ShouldSave(step_);
  if (!for_checkpoint) {
    if (!SnapshotDue(last_snapshot_)) return absl::OkStatus();
  }
  if (!OpenSnapshotWriter()) return absl::OkStatus();
  FenceSnapshot();  // Normally done already, in the step.
  if (snapshot_writer_ == nullptr) return absl::OkStatus();
  const absl::Time start = clock_.Now();
  if (!StartSnapshot(loader_->position(), for_checkpoint)) return absl::OkStatus();
  Average(snapshot_plan_time_, clock_.Now() - start);
  return absl::OkStatus();
}

bool TrainingSession::SampleStepTime(absl::Duration step_time, bool overlapped) {
  Average(step_time_, step_time);
  if (!overlapped) {
    Average(clean_step_time_, step_time);
    return false;
  }
  // The first write of each slot also faults its pages in: not a sample.
  if (snapshots_written_ <= 2) return false;
  Average(copy_step_time_, step_time);
  return true;
}

bool TrainingSession::SnapshotDue(int64_t last) {
  if (last >= 0 && step_ - last < snapshot_interval_) return false;
  // At an interval of 1, a step without a copy now and then, to measure.
  return options_.snapshot_every != 0 || snapshot_interval_ != 1 || ++snapshots_due_ % 100 != 0;
}

// With ZeRO a snapshot needs every rank's optimizer shard: every rank exports at the same
// steps, so that what decides them is the same on every rank, never a rank's own state:
// sharded_snapshots_ (agreed at Restore), the step, and snapshot_interval_ (snapshot_every,
// or with 0 the largest interval any rank proposes, agreed every kIntervalAgreementSteps
// steps). A writer whose snapshots failed goes on exporting with the others. No snapshot
// serves a checkpoint (Save exports for rank 0 on its own), and none is taken on a peer's
// loss (its shard is gone with it): the budget is kSnapshotBudget.
absl::Status TrainingSession::MaybeSnapshotSharded(absl::Duration step_time, bool overlapped) {
  if (!sharded_snapshots_) return absl::OkStatus();
  SampleStepTime(step_time, overlapped);
  if (options_.snapshot_every == 0 && step_ % kIntervalAgreementSteps == 0) {
    const std::optional<int64_t> mine =
        AutoSnapshotInterval(MeasuredSnapshotCosts(), kSnapshotBudget);
    at::Tensor proposal = at::tensor({mine.value_or(snapshot_interval_)}, at::kLong).to(device_);
    at::Tensor proposals = at::empty({world_}, proposal.options());
    RETURN_IF_ERROR(comm_.AllGather(proposal, proposals));
    SetSnapshotInterval(proposals.max().cpu().item<int64_t>(), kSnapshotBudget);
  }
  if (!SnapshotDue(last_sharded_snapshot_)) return absl::OkStatus();
  last_sharded_snapshot_ = step_;
  const absl::Time start = clock_.Now();
  bool keep = !context_.snapshot_writer.empty() && OpenSnapshotWriter();
  if (keep) {
    FenceSnapshot();  // Normally done already, in the step.
    keep = snapshot_writer_ != nullptr;
  }
  RETURN_IF_ERROR(zero_->ExportState(keep));
  // The image holds the exported tensors until its copy is written.
  if (keep) StartSnapshot(loader_->position(), /*for_checkpoint=*/false);
  zero_->ClearExportedState();
  Average(snapshot_plan_time_, clock_.Now() - start);
  return absl::OkStatus();
}

bool TrainingSession::OpenSnapshotWriter() {
  if (snapshot_writer_ != nullptr) return true;
  if (last_snapshot_ >= 0 || !snapshots_) return false;  // Ended by a failure.
  absl::StatusOr<std::unique_ptr<AsyncSnapshotWriter>> writer =
      AsyncSnapshotWriter::Open(context_.snapshot_dir, context_.snapshot_writer);
  if (!writer.ok()) {
    BATON_LOG(WARNING) << "no in-memory snapshots: " << writer.status();
    snapshots_ = false;
    return false;
  }
  snapshot_writer_ = *std::move(writer);
  return true;
}

bool TrainingSession::StartSnapshot(const LoaderPosition& next, bool for_checkpoint) {
  FillProgress(next);
  TrainingState snapshot = state_;
  for (size_t i = named_.size() - buffers_.size(); i < snapshot.tensors.size(); ++i) {
    snapshot.tensors[i].second = snapshot.tensors[i].second.detach().clone();
  }
  if (device_.is_cuda() && staging_ == nullptr) staging_ = std::make_unique<HostStaging>();
  absl::StatusOr<SnapshotImage> image = SnapshotImage::Plan(snapshot, staging_.get());
  if (!image.ok()) {
    BATON_LOG(WARNING) << "in-memory snapshot of step " << step_
                       << " failed, no more are taken: " << image.status();
    snapshot_writer_.reset();
    return false;
  }
  snapshot_bytes_ = image->size();
  snapshot_writer_->Start(context_.generation, *std::move(image), /*keep_copy=*/for_checkpoint);
  snapshot_for_checkpoint_ = for_checkpoint;
  last_snapshot_ = step_;
  if (snapshots_written_ == 0) {
    *context_.log << absl::StrFormat("in-memory snapshot: %.1f MiB per snapshot",
                                     snapshot_bytes_ / 1048576.0)
                  << std::endl;
  }
  return true;
}

void TrainingSession::RecordStepStart() {
  StepStart& start = step_start_;
  start.position = loader_->position();
  start.rng_cpu = CpuRngState();
  start.rng_cuda = CudaRngStates();
  c10::NoGradGuard no_grad;
  if (start.buffers.size() != buffers_.size()) {
    start.buffers.clear();
    for (const at::Tensor& b : buffers_) start.buffers.push_back(b.detach().clone());
  } else {
    for (size_t i = 0; i < buffers_.size(); ++i) start.buffers[i].copy_(buffers_[i]);
  }
}

absl::Status TrainingSession::SnapshotOnPeerLoss(absl::Status status) {
  if (!absl::IsUnavailable(status) || !snapshots_ || context_.snapshot_writer.empty() ||
      device_.is_cuda() || zero_ != nullptr) {
    return status;
  }
  FenceSnapshot();  // A copy in flight (of step_ at the newest) completes first.
  if (snapshot_writer_ != nullptr && last_snapshot_ == step_) return status;
  if (!OpenSnapshotWriter()) return status;
  // Undo what the step in flight did before its update.
  SetRngStates(step_start_.rng_cpu, step_start_.rng_cuda);
  {
    c10::NoGradGuard no_grad;
    for (size_t i = 0; i < buffers_.size(); ++i) buffers_[i].copy_(step_start_.buffers[i]);
  }
  if (!StartSnapshot(step_start_.position, /*for_checkpoint=*/false)) return status;
  FenceSnapshot();
  if (snapshot_writer_ != nullptr) {
    *context_.log << "in-memory snapshot of step " << step_
                  << " taken on losing a peer (the step in flight undone)" << std::endl;
  }
  return status;
}

void TrainingSession::UpdateSnapshotInterval() {
  if (options_.snapshot_every > 0) {
    snapshot_interval_ = options_.snapshot_every;
    return;
  }
  // CPU ranks snapshot on a peer's loss too (SnapshotOnPeerLoss); GPU ranks do not.
  const double budget = device_.is_cuda() ? kSnapshotBudget : kSnapshotBudgetWithLossSnapshots;
  const std::optional<int64_t> next = AutoSnapshotInterval(MeasuredSnapshotCosts(), budget);
  if (next.has_value()) SetSnapshotInterval(*next, budget);
}

SnapshotCosts TrainingSession::MeasuredSnapshotCosts() const {
  return {step_time_, clean_step_time_, copy_step_time_, snapshot_plan_time_, snapshot_copy_time_};
}

void TrainingSession::SetSnapshotInterval(int64_t interval, double budget) {
  const int64_t before = std::exchange(snapshot_interval_, interval);
  // A change at most every 1000 steps in the log (the interval may alternate).
  if (interval == before || step_ - snapshot_logged_ < 1000) return;
  snapshot_logged_ = step_;
  const SnapshotCosts costs = MeasuredSnapshotCosts();
  *context_.log << absl::StrFormat(
                       "in-memory snapshot: %.2f ms per snapshot (a step %.2f ms, %.2f ms with "
                       "a copy in flight): every %d step(s), a budget of %.0f %% of a step",
                       absl::ToDoubleMilliseconds(SnapshotCost(costs)),
                       absl::ToDoubleMilliseconds(
                           costs.clean_step > absl::ZeroDuration() ? costs.clean_step : costs.step),
                       absl::ToDoubleMilliseconds(costs.copy_step), interval, budget * 100)
                << std::endl;
}

// Waits for the snapshot copy in flight; a failed one ends snapshots. A snapshot taken for
// a checkpoint goes to the checkpointer, or, if it failed, the checkpoint is owed: written
// synchronously at the next step boundary.
void TrainingSession::FenceSnapshot() {
  if (snapshot_writer_ == nullptr || !snapshot_writer_->in_flight()) return;
  const absl::Time start = clock_.Now();
  const absl::Status written = snapshot_writer_->Wait();
  const bool for_checkpoint = std::exchange(snapshot_for_checkpoint_, false);
  if (!written.ok()) {
    BATON_LOG(WARNING) << "in-memory snapshot of step " << last_snapshot_
                       << " failed, no more are taken: " << written;
    snapshot_writer_.reset();
    if (for_checkpoint) {
      *context_.log << "the checkpoint of step " << last_snapshot_
                    << " was to be written from its in-memory snapshot, which failed: writing "
                       "one at the next step"
                    << std::endl;
      checkpoint_owed_ = true;
    }
    return;
  }
  if (for_checkpoint) {
    std::optional<std::string> bytes = snapshot_writer_->TakeCopy();
    if (checkpointer_ == nullptr) {
      checkpointer_ = std::make_unique<SnapshotCheckpointer>(*checkpoints_);
      *context_.log << "checkpoints are written from in-memory snapshots, off the training "
                       "thread (step "
                    << last_snapshot_ << " first)" << std::endl;
    }
    if (bytes.has_value()) {
      absl::Status started = checkpointer_->Start(*std::move(bytes));
      if (checkpoint_status_.ok()) checkpoint_status_ = std::move(started);
    }
  }
  if (++snapshots_written_ > 2) {
    Average(snapshot_copy_time_,
            std::max(clock_.Now() - start, snapshot_writer_->last_write_time()));
  }
  if (context_.profiler != nullptr) {
    TraceSpan span{"snapshot", "snapshot", start, clock_.Now() - start};
    span.int_args["step"] = last_snapshot_;
    context_.profiler->Record(std::move(span));
  }
}

absl::Status TrainingSession::WriteCheckpoint() {
  if (comm_.rank() != 0) return absl::OkStatus();
  // One writer of the directory at a time: a checkpoint written from a snapshot first.
  if (checkpointer_ != nullptr) RETURN_IF_ERROR(checkpointer_->Wait());
  FillProgress(loader_->position());
  const absl::Time start = clock_.Now();
  absl::StatusOr<std::string> path = checkpoints_->Save(state_);
  if (!path.ok()) return path.status();
  if (context_.profiler != nullptr) {
    TraceSpan span{"checkpoint", "checkpoint", start, clock_.Now() - start};
    span.int_args["step"] = step_;
    span.string_args["path"] = *path;
    context_.profiler->Record(std::move(span));
  }
  return absl::OkStatus();
}

// Stopped or checkpointed: the open window's line, and for a checkpoint request the
// checkpoint. Done: the last step's checkpoint and rank 0's final.pt.
absl::StatusOr<TrainResult> TrainingSession::Finish() {
  Mark(TrainingPhase::kCheckpoint);
  // The checkpoint written from a snapshot, if one is still being written, first.
  FenceSnapshot();
  if (checkpointer_ != nullptr) RETURN_IF_ERROR(checkpointer_->Wait());
  RETURN_IF_ERROR(std::exchange(checkpoint_status_, absl::OkStatus()));
  if (checkpoint_owed_) last_saved_ = -1;
  if (result_.stopped || result_.checkpointed) {
    if (window_.steps > 0) Emit(std::nullopt);
    if (result_.checkpointed && checkpoints_.has_value() && last_saved_ != step_) {
      RETURN_IF_ERROR(Save());
    }
    return result_;
  }
  if (checkpoints_.has_value() && last_saved_ != step_) RETURN_IF_ERROR(Save());
  if (comm_.rank() == 0 && checkpoints_.has_value()) {
    const std::string path = options_.checkpoint_dir + "/" + kFinalCheckpointName;
    RETURN_IF_ERROR(checkpoints_->SaveWeights(named_, path));
    result_.checkpoint_path = path;
  }
  return result_;
}

absl::StatusOr<double> TrainingSession::Evaluate() {
  const Dataset& test = *context_.test;
  c10::NoGradGuard no_grad;
  model_->Train(false);
  std::vector<int64_t> mine;  // Strided shard: rank, rank + world, ...
  for (int64_t i = comm_.rank(); i < test.size(); i += world_) mine.push_back(i);
  at::Tensor correct = at::zeros({}, at::TensorOptions().dtype(at::kLong).device(device_));
  int64_t count = 0;
  const size_t chunk = static_cast<size_t>(std::max<int64_t>(options_.batch_size, 1));
  for (size_t begin = 0; begin < mine.size(); begin += chunk) {
    const size_t n = std::min(chunk, mine.size() - begin);
    ASSIGN_OR_RETURN(Batch batch, test.Get(absl::MakeConstSpan(mine).subspan(begin, n),
                                           /*augment_seed=*/0));
    batch.input = batch.input.to(device_);
    batch.target = batch.target.to(device_);
    AutocastScope autocast(train_step_->precision());
    const StepOutput out = model_->Forward(batch);
    correct += out.correct;
    count += out.count;
  }
  model_->Train(true);
  at::Tensor counts = at::empty({2}, at::TensorOptions().dtype(at::kDouble).device(device_));
  counts[0].fill_(correct.to(at::kDouble).item<double>());
  counts[1].fill_(static_cast<double>(count));
  RETURN_IF_ERROR(comm_.AllReduceSum(counts));
  const at::Tensor host = counts.cpu();
  const double total = host[1].item<double>();
  return total > 0 ? host[0].item<double>() / total : kNaN;
}

}  // namespace baton::trainer
