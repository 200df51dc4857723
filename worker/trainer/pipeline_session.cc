#include "worker/trainer/pipeline_session.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/spec/trainer_spec_defaults.h"
#include "common/status_macros.h"
#include "worker/trainer/contract/contract.h"
#include "worker/trainer/device/device.h"
#include "worker/trainer/optim/optimizer.h"
#include "worker/trainer/pipeline/checkpoint_layout.h"
#include "worker/trainer/pipeline/schedule.h"
#include "worker/trainer/session_support.h"

namespace baton::trainer {
namespace {

namespace ts = ::baton::trainer_spec;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

}  // namespace

PipelineSession::PipelineSession(const TrainerOptions& options, const TrainerContext& context)
    : options_(options),
      context_(context),
      comm_(*context.comm),
      clock_(*context.clock),
      train_(*context.train),
      device_(context.comm->device()),
      world_(context.comm->world_size()),
      stages_(options.pipeline_stages),
      phases_(*context.clock) {
  result_.first_loss = result_.loss = result_.accuracy = kNaN;
}

// ---- setup ------------------------------------------------------------------------------

absl::Status PipelineSession::Setup() {
  RETURN_IF_ERROR(BuildGroups());
  RETURN_IF_ERROR(BuildStage());
  return BuildData();
}

absl::Status PipelineSession::BuildGroups() {
  if (stages_ < 2 || world_ % stages_ != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        ts::FlagLabel(ts::kPipelineStages), ": ", stages_, " stages do not divide the world of ",
        world_, " ranks (it must be stages x data-parallel replicas)"));
  }
  replicas_ = world_ / stages_;
  stage_ = comm_.rank() % stages_;
  replica_ = comm_.rank() / stages_;
  std::vector<int> pipeline;
  for (int s = 0; s < stages_; ++s) pipeline.push_back(replica_ * stages_ + s);
  ASSIGN_OR_RETURN(pipeline_, pipeline::SubgroupCommunicator::Create(comm_, pipeline));
  if (replicas_ > 1) {
    std::vector<int> replicas;
    for (int r = 0; r < replicas_; ++r) replicas.push_back(r * stages_ + stage_);
    ASSIGN_OR_RETURN(data_parallel_, pipeline::SubgroupCommunicator::Create(comm_, replicas));
  }
  return absl::OkStatus();
}

absl::Status PipelineSession::BuildStage() {
  ModelOptions model_options = options_.model;
  model_options.seed = options_.seed;
  ASSIGN_OR_RETURN(built_,
                   pipeline::BuildStage(model_options, train_.info(), stage_, stages_, device_));
  params_ = built_.stage->Parameters();
  std::set<const void*> tied;
  if (built_.stage->last()) {
    for (const at::Tensor& p : built_.stage->TiedParameters()) {
      tied.insert(p.unsafeGetTensorImpl());
    }
  }
  for (const at::Tensor& p : params_) {
    if (tied.count(p.unsafeGetTensorImpl()) == 0) norm_params_.push_back(p);
  }
  ASSIGN_OR_RETURN(optimizer_, MakeOptimizer(params_, options_.optimizer));
  ASSIGN_OR_RETURN(const pipeline::ScheduleKind kind,
                   pipeline::ParseScheduleKind(options_.pipeline_schedule));
  ASSIGN_OR_RETURN(
      executor_, pipeline::PipelineExecutor::Create(*built_.stage, *pipeline_, data_parallel_.get(),
                                                    kind, options_.pipeline_micro_batches));
  const bool language_model = train_.info().language_model;
  loss_ = [this, language_model](const at::Tensor& logits, const at::Tensor& targets) {
    at::Tensor loss = language_model ? at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}),
                                                              targets.reshape({-1}))
                                     : at::cross_entropy_loss(logits, targets);
    at::NoGradGuard no_grad;
    window_.correct += logits.detach().argmax(-1).eq(targets).sum();
    window_.count += targets.numel();
    return loss;
  };
  *context_.log << "pipeline stage " << stage_ << " of " << stages_ << ", replica " << replica_
                << " of " << replicas_ << " (" << options_.pipeline_schedule << ", "
                << options_.pipeline_micro_batches << " micro-batches): " << built_.stage_numel
                << " of " << built_.model_numel << " parameter elements" << std::endl;
  return absl::OkStatus();
}

// The per-pipeline batch, the sampler over the pipelines, the budget and the LR schedule.
absl::Status PipelineSession::BuildData() {
  const int64_t m = options_.pipeline_micro_batches;
  batch_ = options_.batch_size;
  if (options_.global_batch > 0) {
    if (options_.global_batch % (replicas_ * m) != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          ts::FlagLabel(ts::kGlobalBatch), ": ", options_.global_batch, " does not split over ",
          replicas_, " pipelines into ", m, " equal micro-batches each"));
    }
    batch_ = options_.global_batch / replicas_;
  }
  if (batch_ % m != 0) {
    return absl::InvalidArgumentError(absl::StrCat(ts::FlagLabel(ts::kBatchSize), ": ", batch_,
                                                   " does not split into ", m,
                                                   " equal pipeline micro-batches"));
  }
  ASSIGN_OR_RETURN(
      sampler_,
      options_.global_batch > 0
          ? DistributedSampler::CreateForGlobalBatch(train_.size(), replica_, replicas_, batch_,
                                                     options_.global_batch, options_.seed)
          : DistributedSampler::Create(train_.size(), replica_, replicas_, batch_, options_.seed));
  steps_per_epoch_ = sampler_->batches_per_epoch();
  total_steps_ = BudgetSteps(options_, steps_per_epoch_);
  global_batch_ = batch_ * replicas_;
  ASSIGN_OR_RETURN(schedule_, MakeLrSchedule(options_, total_steps_, global_batch_));
  return absl::OkStatus();
}

// ---- restore ----------------------------------------------------------------------------

absl::Status PipelineSession::Restore() {
  state_.tensors = built_.named;
  state_.optimizer = optimizer_.get();
  if (!options_.checkpoint_dir.empty()) {
    RETURN_IF_ERROR(pipeline::CheckCheckpointLayout(options_.checkpoint_dir, stages_));
    stage_dir_ = pipeline::StageCheckpointDir(options_.checkpoint_dir, stage_, stages_);
    ASSIGN_OR_RETURN(CheckpointManager manager,
                     MakeCheckpointManager(options_, context_, stage_dir_));
    checkpoints_.emplace(std::move(manager));
    absl::StatusOr<RestoredCheckpoint> restored = checkpoints_->RestoreLatest(state_);
    if (restored.ok()) {
      RETURN_IF_ERROR(ApplyRestored(*restored));
    } else if (restored.status().code() != absl::StatusCode::kNotFound) {
      return restored.status();
    }
    // Every stage must resume from the same step (a stage whose save was cut short by a
    // crash has an older newest checkpoint: ABORTED, as for ranks without pipelines).
    RETURN_IF_ERROR(CheckRanksAgreeOnStep(comm_, step_, device_, "pipeline stages"));
    if (replica_ == 0) RETURN_IF_ERROR(checkpoints_->RecordStart(step_));
  }
  result_.steps = step_;
  return absl::OkStatus();
}

absl::Status PipelineSession::ApplyRestored(const RestoredCheckpoint& restored) {
  const TrainingProgress& p = state_.progress;
  step_ = p.step;
  result_.restored_from = restored.path;
  if (options_.global_batch > 0) {
    // The same samples per step whatever the number of pipelines: exact.
    start_ = {step_ / steps_per_epoch_, step_ % steps_per_epoch_};
  } else if (p.world_size == replicas_) {
    start_ = {p.epoch, p.batch_in_epoch};
  } else {
    // Another number of pipelines without a global batch: the same fraction of the epoch.
    const int64_t saved = p.world_size > 0 ? (train_.size() / p.world_size) / batch_ : 0;
    start_ = {p.epoch, saved > 0 ? p.batch_in_epoch * steps_per_epoch_ / saved : 0};
  }
  if (start_.batch_in_epoch >= steps_per_epoch_) start_ = {start_.epoch + 1, 0};
  *context_.log << "restored " << restored.path << " at step " << step_ << " (epoch "
                << start_.epoch << ", batch " << start_.batch_in_epoch << ")" << std::endl;
  return absl::OkStatus();
}

// ---- train ------------------------------------------------------------------------------

absl::StatusOr<TrainResult> PipelineSession::Train() {
  ASSIGN_OR_RETURN(loader_, OpenLoader(options_, train_, *sampler_, device_, start_, clock_));
  lr_ = schedule_->LrAt(step_);
  window_ = NewWindow(device_, clock_.Now());
  ResetPeakMemory(device_);
  epoch_ = start_.epoch;
  while (step_ < total_steps_) {
    ASSIGN_OR_RETURN(const bool stop, StopRequested());
    if (stop) break;
    RETURN_IF_ERROR(Step());
    RETURN_IF_ERROR(CheckpointAndEmit());
  }
  return Finish();
}

// Rank 0's checkpoint request is shared with every rank (one scalar all-reduce per step):
// every stage takes part in the save.
absl::StatusOr<bool> PipelineSession::StopRequested() {
  RETURN_IF_ERROR(CheckLease(context_.lease));
  if (context_.stop != nullptr && context_.stop->load()) {
    result_.stopped = true;
    return true;
  }
  if (context_.checkpoint_request == nullptr) return false;
  const bool mine = context_.checkpoint_request->load() && comm_.rank() == 0;
  at::Tensor flag =
      at::full({1}, mine ? 1.0 : 0.0, at::TensorOptions().dtype(at::kFloat).device(device_));
  RETURN_IF_ERROR(comm_.AllReduceSum(flag));
  const bool checkpoint = flag.cpu().item<float>() > 0;
  if (checkpoint) result_.checkpointed = true;
  return checkpoint;
}

absl::Status PipelineSession::Step() {
  phases_.Start();
  if (loader_->position().batch_in_epoch + 1 > steps_per_epoch_) {
    RETURN_IF_ERROR(loader_->Seek({loader_->position().epoch + 1, 0}));
  }
  epoch_ = loader_->position().epoch;
  lr_ = schedule_->LrAt(step_);
  SetLearningRate(*optimizer_, lr_);
  std::optional<Batch> batch;
  for (int attempt = 0; attempt < 2 && !batch.has_value(); ++attempt) {
    ASSIGN_OR_RETURN(batch, loader_->Next());  // nullopt once at an epoch's end.
  }
  if (!batch.has_value()) return absl::InternalError("the loader returned no batch");
  phases_.Lap(Phase::kData);
  optimizer_->zero_grad();
  at::Tensor inputs;
  at::Tensor targets;
  if (built_.stage->first()) {
    inputs = built_.flatten_input ? batch->input.flatten(1) : batch->input;
  }
  if (built_.stage->last()) targets = batch->target;
  ASSIGN_OR_RETURN(const pipeline::StepResult result, executor_->RunStep(inputs, targets, loss_));
  // The schedule's forwards and backwards count as backward, its waits for peers (the
  // bubble, transfers, the replicas' gradient average) as comm_wait.
  phases_.LapSplit(Phase::kCommWait, result.wait, Phase::kBackward);
  ASSIGN_OR_RETURN(const double norm, ClipGlobalNorm());
  optimizer_->step();
  phases_.Lap(Phase::kOptimizer);
  window_.time += phases_.Stop();
  if (built_.stage->last()) {
    window_.loss_sum += result.loss;
    ++window_.micro_batches;
  }
  window_.samples += batch_;
  ++step_;
  ++window_.steps;
  ++window_.applied;
  window_.grad_norm_sum += norm;
  result_.steps = step_;
  result_.epoch = epoch_;
  return absl::OkStatus();
}

absl::StatusOr<double> PipelineSession::ClipGlobalNorm() {
  at::Tensor sum = at::zeros({1}, at::TensorOptions().dtype(at::kDouble).device(device_));
  {
    at::NoGradGuard no_grad;
    for (const at::Tensor& p : norm_params_) {
      if (p.grad().defined()) sum += p.grad().to(at::kDouble).pow(2).sum();
    }
  }
  RETURN_IF_ERROR(pipeline_->AllReduceSum(sum));
  const double norm = std::sqrt(sum.cpu().item<double>());
  const double max_norm = options_.step.max_grad_norm;
  if (max_norm > 0) {
    const double coef = max_norm / (norm + 1e-6);
    if (coef < 1) {
      at::NoGradGuard no_grad;
      for (const at::Tensor& p : params_) {
        if (p.grad().defined()) p.grad().mul_(coef);
      }
    }
  }
  return norm;
}

absl::Status PipelineSession::CheckpointAndEmit() {
  if (checkpoints_.has_value() && checkpoints_->ShouldSave(step_)) {
    RETURN_IF_ERROR(Save());
    last_saved_ = step_;
  }
  if (step_ % options_.log_every != 0 && step_ != total_steps_) return absl::OkStatus();
  return Emit(/*collective=*/true);
}

absl::Status PipelineSession::Emit(bool collective) {
  if (collective) {
    // [loss sum, steps with a loss, correct, count]: the last stages' (others add zeros).
    at::Tensor sums = at::zeros({4}, at::TensorOptions().dtype(at::kDouble).device(device_));
    sums[0].fill_(window_.loss_sum.item<double>());
    sums[1].fill_(static_cast<double>(window_.micro_batches));
    sums[2].fill_(static_cast<double>(window_.correct.item<int64_t>()));
    sums[3].fill_(static_cast<double>(window_.count));
    RETURN_IF_ERROR(comm_.AllReduceSum(sums));
    const at::Tensor host = sums.cpu();
    window_.loss_sum.fill_(host[0].item<double>());
    window_.micro_batches = static_cast<int64_t>(host[1].item<double>());
    window_.correct.fill_(static_cast<int64_t>(host[2].item<double>()));
    window_.count = static_cast<int64_t>(host[3].item<double>());
  }
  WindowFacts facts;
  facts.now = clock_.Now();
  facts.step = step_;
  facts.epoch = epoch_;
  facts.total_steps = total_steps_;
  facts.world_size = replicas_;  // window_.samples are one pipeline's.
  facts.lr = lr_;
  facts.tokens_per_sample = TokensPerSample(train_.info());
  facts.comm_bytes = replicas_ > 1 ? static_cast<double>(built_.stage_numel) * sizeof(float) : 0.0;
  facts.memory = MemoryStats(device_);
  publisher_.Publish(ReportWindow(window_, facts), *context_.metrics, *context_.log, result_);
  window_ = NewWindow(device_, clock_.Now());
  ResetPeakMemory(device_);
  return absl::OkStatus();
}

// Replica 0 of each stage writes its stage's checkpoint.
absl::Status PipelineSession::Save() {
  if (!checkpoints_.has_value() || replica_ != 0) return absl::OkStatus();
  const LoaderPosition next = loader_->position();
  state_.progress.step = step_;
  state_.progress.epoch = next.epoch;
  state_.progress.batch_in_epoch = next.batch_in_epoch;
  state_.progress.samples_seen = step_ * global_batch_;
  state_.progress.world_size = replicas_;  // Pipelines: the data's world.
  return checkpoints_->Save(state_).status();
}

absl::StatusOr<TrainResult> PipelineSession::Finish() {
  if (result_.stopped || result_.checkpointed) {
    // A stop is this process's own (no collective); a checkpoint request is every rank's.
    if (window_.steps > 0) RETURN_IF_ERROR(Emit(/*collective=*/result_.checkpointed));
    if (result_.checkpointed && last_saved_ != step_) RETURN_IF_ERROR(Save());
    return result_;
  }
  if (last_saved_ != step_) RETURN_IF_ERROR(Save());
  if (checkpoints_.has_value() && replica_ == 0) {
    const std::string path = stage_dir_ + "/" + kFinalCheckpointName;
    RETURN_IF_ERROR(checkpoints_->SaveWeights(built_.named, path));
    result_.checkpoint_path = path;
  }
  return result_;
}

}  // namespace baton::trainer
