#include "worker/trainer/trainer.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "common/trainer_spec_defaults.h"
#include "worker/trainer/contract.h"
#include "worker/trainer/data/distributed_sampler.h"
#include "worker/trainer/data/loader.h"
#include "worker/trainer/device.h"
#include "worker/trainer/optim/checkpoint_manager.h"
#include "worker/trainer/precision.h"

namespace baton::trainer {
namespace {

namespace ts = ::baton::trainer_spec;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Seconds(absl::Duration d) { return absl::ToDoubleSeconds(d); }

// Per-step time of each phase, summed over a window.
struct PhaseTimes {
  absl::Duration step, data, forward, backward, comm_wait, optimizer;
};

// Training statistics of this rank since the last metric line.
struct Window {
  int64_t steps = 0;
  int64_t micro_batches = 0;
  int64_t samples = 0;            // This rank's samples.
  int64_t count = 0;              // Accuracy denominator (samples or target tokens).
  at::Tensor loss_sum;            // Sum of micro-batch mean losses (double, on device).
  at::Tensor correct;             // Sum of StepOutput::correct (int64, on device).
  int64_t applied = 0;            // Steps whose update was applied.
  double grad_norm_sum = 0;       // Over applied steps.
  int64_t skipped = 0;
  PhaseTimes time;
  absl::Time start;
};

std::string FormatOrNan(double v, const char* format) {
  return std::isfinite(v) ? absl::StrFormat(format, v) : "nan";
}

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

// ts::Check(field, value, "--<name>").
template <typename Field, typename Value>
absl::Status CheckFlag(const Field& field, const Value& value) {
  return ts::Check(field, value, ts::FlagLabel(field));
}

absl::Status ValidateModelAndOptimizer(const ModelOptions& m, const OptimizerOptions& o) {
  RETURN_IF_ERROR(CheckFlag(ts::kModel, m.model));
  RETURN_IF_ERROR(CheckFlag(ts::kHidden, m.hidden));
  RETURN_IF_ERROR(CheckFlag(ts::kContextLength, m.context_length));
  RETURN_IF_ERROR(CheckFlag(ts::kGptLayers, m.gpt_layers));
  RETURN_IF_ERROR(CheckFlag(ts::kGptHeads, m.gpt_heads));
  RETURN_IF_ERROR(CheckFlag(ts::kGptWidth, m.gpt_width));
  RETURN_IF_ERROR(CheckFlag(ts::kVocabSize, m.vocab_size));
  RETURN_IF_ERROR(CheckFlag(ts::kTask, m.task));
  RETURN_IF_ERROR(CheckFlag(ts::kOptimizer, o.name));
  RETURN_IF_ERROR(CheckFlag(ts::kLr, o.lr));
  RETURN_IF_ERROR(CheckFlag(ts::kMomentum, o.momentum));
  RETURN_IF_ERROR(CheckFlag(ts::kWeightDecay, o.weight_decay));
  if (o.nesterov && (o.name != "sgd" || !(o.momentum > 0))) {
    return absl::InvalidArgumentError(absl::StrCat(
        ts::FlagLabel(ts::kNesterov), " needs --optimizer=sgd with --momentum > 0"));
  }
  RETURN_IF_ERROR(CheckFlag(ts::kAdamBeta1, o.adam_beta1));
  RETURN_IF_ERROR(CheckFlag(ts::kAdamBeta2, o.adam_beta2));
  return CheckFlag(ts::kAdamEps, o.adam_eps);
}

absl::Status ValidateScheduleAndStep(const LrScheduleOptions& s, const TrainStepOptions& t) {
  RETURN_IF_ERROR(CheckFlag(ts::kLrSchedule, s.kind));
  RETURN_IF_ERROR(CheckFlag(ts::kWarmupSteps, s.warmup_steps));
  RETURN_IF_ERROR(CheckFlag(ts::kLrStepSize, s.step_size));
  if (s.kind == "step" && s.step_size == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        ts::FlagLabel(ts::kLrStepSize), ": 0 is invalid; must be > 0 for lr_schedule 'step'"));
  }
  RETURN_IF_ERROR(CheckFlag(ts::kLrGamma, s.gamma));
  RETURN_IF_ERROR(CheckFlag(ts::kMinLr, s.min_lr));
  RETURN_IF_ERROR(CheckFlag(ts::kBaseBatch, s.base_batch));
  RETURN_IF_ERROR(CheckFlag(ts::kAccumulationSteps, t.accumulation_steps));
  RETURN_IF_ERROR(CheckFlag(ts::kBucketCapMb, t.reducer.bucket_cap_mb));
  return CheckFlag(ts::kMaxGradNorm, t.max_grad_norm);
}

absl::Status ValidateBatchDataAndBudget(const TrainerOptions& o) {
  RETURN_IF_ERROR(CheckFlag(ts::kBatchSize, o.batch_size));
  RETURN_IF_ERROR(CheckFlag(ts::kGlobalBatch, o.global_batch));
  if (o.global_batch > 0 && o.step.accumulation_steps != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat(ts::FlagLabel(ts::kGlobalBatch),
                     " derives the accumulation steps per world size; leave "
                     "--accumulation_steps at 1"));
  }
  RETURN_IF_ERROR(CheckFlag(ts::kLoaderThreads, o.loader_threads));
  RETURN_IF_ERROR(CheckFlag(ts::kPrefetchBatches, o.prefetch_batches));
  RETURN_IF_ERROR(CheckFlag(ts::kLogEvery, o.log_every));
  RETURN_IF_ERROR(CheckFlag(ts::kCheckpointEvery, o.checkpoint_every));
  RETURN_IF_ERROR(CheckFlag(ts::kKeepCheckpoints, o.keep_checkpoints));
  RETURN_IF_ERROR(CheckFlag(ts::kMaxSteps, o.max_steps));
  RETURN_IF_ERROR(CheckFlag(ts::kMaxEpochs, o.max_epochs));
  if (o.max_steps == 0 && o.max_epochs == 0) {
    return absl::InvalidArgumentError("one of --max_steps and --max_epochs must be > 0");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTrainerOptions(const TrainerOptions& o) {
  RETURN_IF_ERROR(ValidateModelAndOptimizer(o.model, o.optimizer));
  RETURN_IF_ERROR(ValidateScheduleAndStep(o.schedule, o.step));
  return ValidateBatchDataAndBudget(o);
}

Trainer::Trainer(TrainerOptions options, TrainerContext context)
    : options_(std::move(options)), context_(context) {}

absl::StatusOr<TrainResult> Trainer::Run() {
  if (context_.train == nullptr || context_.comm == nullptr || context_.metrics == nullptr ||
      context_.clock == nullptr || context_.log == nullptr) {
    return absl::InvalidArgumentError("TrainerContext is missing a required collaborator");
  }
  try {
    return RunOrThrow();
  } catch (const std::exception& e) {  // c10::Error derives from std::exception.
    const std::string message = e.what();
    return absl::InternalError(
        absl::StrCat("training failed: ", message.substr(0, message.find('\n'))));
  }
}

absl::StatusOr<TrainResult> Trainer::RunOrThrow() {
  RETURN_IF_ERROR(ValidateTrainerOptions(options_));
  Communicator& comm = *context_.comm;
  const Clock& clock = *context_.clock;
  const Dataset& train = *context_.train;
  const DatasetInfo& info = train.info();
  const c10::Device device = comm.device();
  const int world = comm.world_size();
  int64_t batch_size = options_.batch_size;
  TrainStepOptions step_options = options_.step;
  if (options_.global_batch > 0) {
    ASSIGN_OR_RETURN(const GlobalBatchSplit split,
                     SplitGlobalBatch(options_.global_batch, world, options_.batch_size));
    batch_size = split.micro_batch;
    step_options.accumulation_steps = split.accumulation_steps;
    if (comm.rank() == 0) {
      *context_.log << "global batch " << options_.global_batch << " = " << world << " ranks x "
                    << split.accumulation_steps << " micro-batches x " << batch_size
                    << std::endl;
    }
  }
  const int64_t accumulation = step_options.accumulation_steps;

  // ---- model, optimizer, schedule, step engine -----------------------------------------
  ModelOptions model_options = options_.model;
  model_options.seed = options_.seed;
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, MakeModel(model_options, info));
  model->To(device);
  model->Train(true);
  const std::vector<at::Tensor> params = model->Parameters();
  NamedTensors named = model->NamedParameters();
  std::vector<at::Tensor> buffers;
  for (auto& buffer : model->NamedBuffers()) {
    buffers.push_back(buffer.second);
    named.push_back(std::move(buffer));
  }
  {
    std::vector<at::Tensor> all;
    for (const auto& [name, tensor] : named) all.push_back(tensor);
    RETURN_IF_ERROR(BroadcastParameters(all, /*root=*/0, comm));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<torch::optim::Optimizer> optimizer,
                   MakeOptimizer(params, options_.optimizer));

  ASSIGN_OR_RETURN(const DistributedSampler sampler,
                   options_.global_batch > 0
                       ? DistributedSampler::CreateForGlobalBatch(
                             train.size(), comm.rank(), world, batch_size,
                             options_.global_batch, options_.seed)
                       : DistributedSampler::Create(train.size(), comm.rank(), world,
                                                    batch_size, options_.seed));
  const int64_t micro_per_epoch = sampler.batches_per_epoch();
  const int64_t steps_per_epoch = micro_per_epoch / accumulation;
  if (steps_per_epoch == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the dataset (", train.size(), " samples) gives each of ", world, " ranks ",
        micro_per_epoch, " batches of ", batch_size, " per epoch, fewer than ",
        ts::FlagLabel(ts::kAccumulationSteps), "=", accumulation));
  }
  int64_t total_steps = std::numeric_limits<int64_t>::max();
  if (options_.max_steps > 0) total_steps = options_.max_steps;
  if (options_.max_epochs > 0) {
    total_steps = std::min(total_steps, options_.max_epochs * steps_per_epoch);
  }
  const int64_t global_batch = batch_size * accumulation * world;
  LrScheduleOptions schedule_options = options_.schedule;
  schedule_options.base_lr = options_.optimizer.lr;
  schedule_options.total_steps = total_steps;
  schedule_options.global_batch = global_batch;
  ASSIGN_OR_RETURN(const LrSchedule schedule, LrSchedule::Create(schedule_options));
  ASSIGN_OR_RETURN(std::unique_ptr<TrainStep> train_step,
                   TrainStep::Create(params, *optimizer, comm, clock, step_options));
  if (!train_step->precision().note.empty() && comm.rank() == 0) {
    BATON_LOG(WARNING) << train_step->precision().note;
  }
  if (train_step->reducer().compression_emulated() && comm.rank() == 0) {
    BATON_LOG(WARNING) << "--grad_compression: the " << comm.backend()
                       << " backend cannot sum 16-bit values of that type; gradients are "
                          "rounded to it and summed in float32";
  }

  // ---- restore -------------------------------------------------------------------------
  TrainResult result;
  result.first_loss = result.loss = result.accuracy = kNaN;
  std::optional<CheckpointManager> checkpoints;
  TrainingState state;
  state.tensors = named;
  state.optimizer = optimizer.get();
  int64_t step = 0;
  LoaderPosition start;
  if (!options_.checkpoint_dir.empty()) {
    CheckpointManagerOptions manager_options;
    manager_options.dir = options_.checkpoint_dir;
    manager_options.checkpoint_every = options_.checkpoint_every;
    manager_options.keep = options_.keep_checkpoints;
    manager_options.generation = context_.generation;
    manager_options.job = context_.job_id;
    ASSIGN_OR_RETURN(CheckpointManager manager, CheckpointManager::Create(manager_options));
    checkpoints.emplace(std::move(manager));
    absl::StatusOr<RestoredCheckpoint> restored = checkpoints->RestoreLatest(state);
    if (restored.ok()) {
      const TrainingProgress& p = state.progress;
      step = p.step;
      result.restored_from = restored->path;
      // A scale of 1 means the saving run had no loss scaling: keep the initial scale.
      if (train_step->scaler().enabled() && p.scaler_scale > 0 && p.scaler_scale != 1.0) {
        RETURN_IF_ERROR(
            train_step->mutable_scaler().Restore(p.scaler_scale, p.scaler_growth_tracker));
      }
      // Micro-batches per epoch of the gang that saved it (same dataset and batch size).
      const int64_t saved_micro =
          p.world_size > 0 ? (train.size() / p.world_size) / batch_size : micro_per_epoch;
      // With a global batch every step consumed the same samples whatever the world
      // size, so the position follows from the step count alone, exactly.
      start = options_.global_batch > 0
                  ? LoaderPosition{step / steps_per_epoch, step % steps_per_epoch * accumulation}
                  : ResumePosition(p, world, micro_per_epoch, accumulation, saved_micro);
      *context_.log << "restored " << restored->path << " at step " << step << " (epoch "
                    << start.epoch << ", batch " << start.batch_in_epoch << ")" << std::endl;
    } else if (restored.status().code() != absl::StatusCode::kNotFound) {
      return restored.status();
    }
    // Every rank must have restored the same step.
    at::Tensor steps = at::full({2}, static_cast<double>(step),
                                at::TensorOptions().dtype(at::kDouble).device(device));
    steps[1].fill_(static_cast<double>(step) * step);
    RETURN_IF_ERROR(comm.AllReduceSum(steps));
    const at::Tensor host = steps.cpu();
    const double mean = host[0].item<double>() / world;
    if (std::abs(host[1].item<double>() / world - mean * mean) > 0.5 ||
        std::abs(mean - static_cast<double>(step)) > 0.5) {
      return absl::AbortedError(
          absl::StrCat("ranks restored different checkpoints (this rank: step ", step, ")"));
    }
    // From here on older generations' writers are fenced off the directory; if a newer
    // generation has started already, this one is superseded and must not train.
    if (comm.rank() == 0) RETURN_IF_ERROR(checkpoints->RecordStart(step));
  }
  result.steps = step;

  // ---- data ----------------------------------------------------------------------------
  LoaderOptions loader_options;
  loader_options.threads = options_.loader_threads;
  loader_options.prefetch_batches = options_.prefetch_batches;
  loader_options.seed = options_.seed;
  loader_options.device = device;
  loader_options.start = start;
  loader_options.clock = &clock;
  ASSIGN_OR_RETURN(std::unique_ptr<Loader> loader,
                   Loader::Create(&train, sampler, loader_options));

  // ---- metrics -------------------------------------------------------------------------
  const at::TensorOptions on_device = at::TensorOptions().device(device);
  bool first_window = true;
  bool metrics_failed = false;
  double lr = schedule.LrAt(step);
  Window window;
  auto reset_window = [&] {
    window = Window();
    window.loss_sum = at::zeros({}, on_device.dtype(at::kDouble));
    window.correct = at::zeros({}, on_device.dtype(at::kLong));
    window.start = clock.Now();
    ResetPeakMemory(device);
  };
  reset_window();
  const bool loss_scaling = train_step->scaler().enabled();
  const int64_t tokens_per_sample =
      info.language_model && !info.input_shape.empty() ? info.input_shape.back() : 0;

  // Writes the metric line and the human line for `window`, then starts a new window.
  auto emit = [&](int64_t at_step, int64_t epoch, std::optional<double> eval_accuracy) {
    const double elapsed = Seconds(clock.Now() - window.start);
    const double micro = static_cast<double>(std::max<int64_t>(window.micro_batches, 1));
    const double loss = window.micro_batches > 0 ? window.loss_sum.item<double>() / micro : kNaN;
    const double accuracy =
        window.count > 0 ? static_cast<double>(window.correct.item<int64_t>()) / window.count
                         : kNaN;
    const double global_samples = static_cast<double>(window.samples) * world;
    const double rate = elapsed > 0 ? global_samples / elapsed : kNaN;
    const double steps = static_cast<double>(std::max<int64_t>(window.steps, 1));
    MetricFields fields = {{kMetricStep, static_cast<double>(at_step)},
                           {kMetricEpoch, static_cast<double>(epoch)},
                           {kMetricLoss, loss},
                           {kMetricAccuracy, accuracy},
                           {kMetricSamplesPerSec, rate},
                           {kMetricLr, lr}};
    if (tokens_per_sample > 0) {
      fields.emplace_back(kMetricTokensPerSec, rate * tokens_per_sample);
    }
    fields.emplace_back(kMetricTimeStep, Seconds(window.time.step) / steps);
    fields.emplace_back(kMetricTimeData, Seconds(window.time.data) / steps);
    fields.emplace_back(kMetricTimeForward, Seconds(window.time.forward) / steps);
    fields.emplace_back(kMetricTimeBackward, Seconds(window.time.backward) / steps);
    fields.emplace_back(kMetricTimeCommWait, Seconds(window.time.comm_wait) / steps);
    fields.emplace_back(kMetricTimeOptimizer, Seconds(window.time.optimizer) / steps);
    fields.emplace_back(kMetricCommBytes,
                        static_cast<double>(train_step->reducer().bytes_per_sync()));
    fields.emplace_back(kMetricGradNorm,
                        window.applied > 0 ? window.grad_norm_sum / window.applied : kNaN);
    if (loss_scaling) {
      fields.emplace_back(kMetricLossScale, train_step->scaler().scale());
      fields.emplace_back(kMetricSkippedSteps, static_cast<double>(window.skipped));
    }
    if (const std::optional<DeviceMemory> memory = MemoryStats(device); memory.has_value()) {
      fields.emplace_back(kMetricMemAllocated, static_cast<double>(memory->allocated_bytes));
      fields.emplace_back(kMetricMemReserved, static_cast<double>(memory->reserved_bytes));
      fields.emplace_back(kMetricMemPeak, static_cast<double>(memory->peak_allocated_bytes));
    }
    if (eval_accuracy.has_value()) fields.emplace_back(kMetricEvalAccuracy, *eval_accuracy);
    if (absl::Status s = context_.metrics->Write(fields); !s.ok() && !metrics_failed) {
      metrics_failed = true;
      BATON_LOG(WARNING) << "metric lines are lost: " << s;
    }
    const double ms = 1000.0 / steps;
    std::string line = absl::StrFormat(
        "step %d/%d epoch %d loss %s accuracy %s samples/s %s lr %g step_ms %.1f (data %.1f "
        "fwd %.1f bwd %.1f comm %.1f opt %.1f)",
        at_step, total_steps, epoch, FormatOrNan(loss, "%.4f"), FormatOrNan(accuracy, "%.4f"),
        FormatOrNan(rate, "%.0f"), lr, Seconds(window.time.step) * ms,
        Seconds(window.time.data) * ms, Seconds(window.time.forward) * ms,
        Seconds(window.time.backward) * ms, Seconds(window.time.comm_wait) * ms,
        Seconds(window.time.optimizer) * ms);
    if (loss_scaling) {
      absl::StrAppend(&line, absl::StrFormat(" loss_scale %g skipped %d",
                                             train_step->scaler().scale(), window.skipped));
    }
    if (eval_accuracy.has_value()) {
      absl::StrAppend(&line, " eval_accuracy ", FormatOrNan(*eval_accuracy, "%.4f"));
    }
    *context_.log << line << std::endl;
    if (first_window) result.first_loss = loss;
    first_window = false;
    result.loss = loss;
    result.accuracy = accuracy;
    reset_window();
  };

  auto save = [&](int64_t at_step) -> absl::Status {
    if (!checkpoints.has_value() || comm.rank() != 0) return absl::OkStatus();
    const LoaderPosition next = loader->position();
    state.progress.step = at_step;
    state.progress.epoch = next.epoch;
    state.progress.batch_in_epoch = next.batch_in_epoch;
    state.progress.samples_seen = at_step * global_batch;
    state.progress.world_size = world;
    state.progress.scaler_scale = train_step->scaler().scale();
    state.progress.scaler_growth_tracker = train_step->scaler().growth_tracker();
    absl::StatusOr<std::string> path = checkpoints->Save(state);
    if (!path.ok()) return path.status();
    return absl::OkStatus();
  };

  // ---- the loop ------------------------------------------------------------------------
  const bool timing_sync = options_.step.synchronize_for_timing;
  auto sync = [&] {
    if (timing_sync) SynchronizeDevice(device);
  };
  int64_t epoch = start.epoch;
  int64_t last_saved = -1;
  std::ofstream sample_log;
  std::string step_samples;           // This step's sample ids, comma-separated.
  int64_t logged_epoch = -1;          // Epoch of epoch_indices.
  std::vector<int64_t> epoch_indices;
  if (!options_.sample_log.empty()) {
    const std::string path = absl::StrCat(options_.sample_log, ".", comm.rank());
    sample_log.open(path, std::ios::app);
    if (!sample_log) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot append to ", ts::FlagLabel(ts::kSampleLog), " file ", path));
    }
  }
  while (step < total_steps) {
    if (context_.stop != nullptr && context_.stop->load()) {
      result.stopped = true;
      break;
    }
    if (context_.checkpoint_request != nullptr && context_.checkpoint_request->load() &&
        comm.rank() == 0) {
      result.checkpointed = true;
      break;
    }
    const absl::Time step_start = clock.Now();
    // An epoch's leftover micro-batches (fewer than one step's worth) are not used.
    if (loader->position().batch_in_epoch + accumulation > micro_per_epoch) {
      RETURN_IF_ERROR(loader->Seek({loader->position().epoch + 1, 0}));
    }
    epoch = loader->position().epoch;
    lr = schedule.LrAt(step);
    SetLearningRate(*optimizer, lr);
    for (int64_t m = 0; m < accumulation; ++m) {
      absl::Time t = clock.Now();
      std::optional<Batch> batch;
      LoaderPosition at;
      for (int attempt = 0; attempt < 2 && !batch.has_value(); ++attempt) {
        at = loader->position();
        ASSIGN_OR_RETURN(batch, loader->Next());  // nullopt once at an epoch's end.
      }
      if (!batch.has_value()) return absl::InternalError("the loader returned no batch");
      if (sample_log.is_open()) {
        if (logged_epoch != at.epoch) {
          epoch_indices = sampler.EpochIndices(at.epoch);
          logged_epoch = at.epoch;
        }
        for (int64_t k = 0; k < batch_size; ++k) {
          absl::StrAppend(&step_samples, step_samples.empty() ? "" : ",",
                          epoch_indices[at.batch_in_epoch * batch_size + k]);
        }
      }
      const absl::Time forward_start = clock.Now();
      window.time.data += forward_start - t;
      StepOutput out;
      {
        AutocastScope autocast(train_step->precision());
        out = model->Forward(*batch);
      }
      sync();
      const absl::Time backward_start = clock.Now();
      window.time.forward += backward_start - forward_start;
      RETURN_IF_ERROR(train_step->Backward(out.loss));
      sync();
      window.time.backward += clock.Now() - backward_start;
      window.loss_sum += out.loss.detach().to(at::kDouble);
      window.correct += out.correct;
      window.count += out.count;
      window.samples += batch->input.size(0);
      ++window.micro_batches;
    }
    ASSIGN_OR_RETURN(const StepOutcome outcome, train_step->Finish());
    if (sample_log.is_open()) {
      sample_log << context_.generation << " " << step + 1 << " " << comm.rank() << " "
                 << step_samples << std::endl;  // Flushed: a crash loses no finished step.
      step_samples.clear();
    }
    window.time.comm_wait += outcome.comm_wait;
    window.time.optimizer += outcome.optimizer;
    window.time.step += clock.Now() - step_start;
    ++step;
    ++window.steps;
    if (outcome.skipped) {
      ++window.skipped;
      ++result.skipped_steps;
    } else {
      ++window.applied;
      window.grad_norm_sum += outcome.grad_norm;
    }
    result.steps = step;
    result.epoch = epoch;

    if (checkpoints.has_value() && checkpoints->ShouldSave(step)) {
      RETURN_IF_ERROR(save(step));
      last_saved = step;
    }
    const bool last = step == total_steps;
    if (step % options_.log_every == 0 || last) {
      std::optional<double> eval_accuracy;
      if (last && context_.test != nullptr) {
        const absl::Time eval_start = clock.Now();
        // Running statistics (BatchNorm) come from each rank's own batches: evaluate with
        // rank 0's everywhere, the ones final.pt holds.
        RETURN_IF_ERROR(BroadcastParameters(buffers, /*root=*/0, comm));
        ASSIGN_OR_RETURN(eval_accuracy, Evaluate(*model, train_step->precision()));
        result.eval_accuracy = eval_accuracy;
        window.start += clock.Now() - eval_start;  // Not training time.
      }
      emit(step, epoch, eval_accuracy);
    }
  }
  if (result.stopped || result.checkpointed) {
    if (window.steps > 0) emit(step, epoch, std::nullopt);
    if (result.checkpointed && checkpoints.has_value() && last_saved != step) {
      RETURN_IF_ERROR(save(step));
    }
    return result;
  }

  if (checkpoints.has_value() && last_saved != step) RETURN_IF_ERROR(save(step));
  if (comm.rank() == 0 && checkpoints.has_value()) {
    const std::string path = options_.checkpoint_dir + "/" + kFinalCheckpointName;
    RETURN_IF_ERROR(checkpoints->SaveWeights(named, path));
    result.checkpoint_path = path;
  }
  return result;
}

absl::StatusOr<double> Trainer::Evaluate(Model& model, const PrecisionPlan& precision) {
  const Dataset& test = *context_.test;
  Communicator& comm = *context_.comm;
  const c10::Device device = comm.device();
  c10::NoGradGuard no_grad;
  model.Train(false);
  std::vector<int64_t> mine;  // Strided shard: rank, rank + world, ...
  for (int64_t i = comm.rank(); i < test.size(); i += comm.world_size()) mine.push_back(i);
  at::Tensor correct = at::zeros({}, at::TensorOptions().dtype(at::kLong).device(device));
  int64_t count = 0;
  const size_t chunk = static_cast<size_t>(std::max<int64_t>(options_.batch_size, 1));
  for (size_t begin = 0; begin < mine.size(); begin += chunk) {
    const size_t n = std::min(chunk, mine.size() - begin);
    ASSIGN_OR_RETURN(Batch batch, test.Get(absl::MakeConstSpan(mine).subspan(begin, n),
                                           /*augment_seed=*/0));
    batch.input = batch.input.to(device);
    batch.target = batch.target.to(device);
    AutocastScope autocast(precision);
    const StepOutput out = model.Forward(batch);
    correct += out.correct;
    count += out.count;
  }
  model.Train(true);
  at::Tensor counts = at::empty({2}, at::TensorOptions().dtype(at::kDouble).device(device));
  counts[0].fill_(correct.to(at::kDouble).item<double>());
  counts[1].fill_(static_cast<double>(count));
  RETURN_IF_ERROR(comm.AllReduceSum(counts));
  const at::Tensor host = counts.cpu();
  const double total = host[1].item<double>();
  return total > 0 ? host[0].item<double>() / total : kNaN;
}

}  // namespace baton::trainer
