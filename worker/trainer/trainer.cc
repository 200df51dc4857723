#include "worker/trainer/trainer.h"

#include <ATen/ATen.h>
#include <torch/nn/functional/loss.h>
#include <torch/optim/sgd.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/types/span.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker/trainer/checkpoint.h"
#include "worker/trainer/contract.h"
#include "worker/trainer/data/distributed_sampler.h"

namespace baton::trainer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kEvalChunk = 1024;

// Training statistics of this rank since the last metric line.
struct Window {
  int64_t steps = 0;
  double loss_sum = 0;
  int64_t correct = 0;
  int64_t samples = 0;
  absl::Time start;

  double loss() const { return steps > 0 ? loss_sum / steps : kNaN; }
  double accuracy() const { return samples > 0 ? static_cast<double>(correct) / samples : kNaN; }
};

std::string FormatOptional(double v, const char* format) {
  return std::isfinite(v) ? absl::StrFormat(format, v) : "nan";
}

}  // namespace

absl::Status ValidateTrainerOptions(const TrainerOptions& o) {
  auto bad = [](const char* flag, const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " ", why));
  };
  if (o.batch_size <= 0) return bad(kFlagBatchSize, "must be > 0");
  if (!(o.lr > 0) || !std::isfinite(o.lr)) return bad(kFlagLr, "must be a positive number");
  if (!(o.momentum >= 0 && o.momentum < 1)) return bad(kFlagMomentum, "must be in [0, 1)");
  if (o.log_every <= 0) return bad(kFlagLogEvery, "must be > 0");
  if (o.max_steps < 0) return bad(kFlagMaxSteps, "must be >= 0");
  if (o.max_epochs < 0) return bad(kFlagMaxEpochs, "must be >= 0");
  if (o.max_steps == 0 && o.max_epochs == 0) {
    return absl::InvalidArgumentError("one of --max_steps and --max_epochs must be > 0");
  }
  for (const int64_t w : o.hidden) {
    if (w <= 0) return bad(kFlagHidden, "widths must be > 0");
  }
  return absl::OkStatus();
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
    return absl::InternalError(absl::StrCat("training failed: ", e.what()));
  }
}

absl::StatusOr<TrainResult> Trainer::RunOrThrow() {
  RETURN_IF_ERROR(ValidateTrainerOptions(options_));
  Communicator& comm = *context_.comm;
  const MnistDataset& train = *context_.train;
  const int world = comm.world_size();
  const int64_t batch_size = options_.batch_size;
  ASSIGN_OR_RETURN(
      const DistributedSampler sampler,
      DistributedSampler::Create(train.size(), comm.rank(), world, batch_size, options_.seed));
  const int64_t steps_per_epoch = sampler.batches_per_epoch();
  int64_t total_steps = std::numeric_limits<int64_t>::max();
  if (options_.max_steps > 0) total_steps = options_.max_steps;
  if (options_.max_epochs > 0) {
    total_steps = std::min(total_steps, options_.max_epochs * steps_per_epoch);
  }

  Mlp model(MlpOptions{train.feature_dim(), options_.hidden, kNumClasses}, options_.seed);
  const std::vector<at::Tensor> params = model->parameters();
  RETURN_IF_ERROR(BroadcastParameters(params, /*root=*/0, comm));
  torch::optim::SGD optimizer(params,
                              torch::optim::SGDOptions(options_.lr).momentum(options_.momentum));

  TrainResult result;
  result.first_loss = result.loss = result.accuracy = kNaN;
  bool first_window = true;
  bool metrics_failed = false;
  Window window;
  window.start = context_.clock->Now();

  // Writes the metric line and the human line for `window`, then starts a new window.
  auto emit = [&](int64_t step, int64_t epoch, std::optional<double> eval_accuracy,
                  absl::Duration elapsed) {
    const double seconds = absl::ToDoubleSeconds(elapsed);
    const double rate =
        seconds > 0 ? static_cast<double>(window.steps * batch_size * world) / seconds : kNaN;
    MetricFields fields = {{kMetricStep, static_cast<double>(step)},
                           {kMetricEpoch, static_cast<double>(epoch)},
                           {kMetricLoss, window.loss()},
                           {kMetricAccuracy, window.accuracy()},
                           {kMetricSamplesPerSec, rate},
                           {kMetricLr, options_.lr}};
    if (eval_accuracy.has_value()) fields.emplace_back(kMetricEvalAccuracy, *eval_accuracy);
    if (absl::Status s = context_.metrics->Write(fields); !s.ok() && !metrics_failed) {
      metrics_failed = true;
      BATON_LOG(WARNING) << "metric lines are lost: " << s;
    }
    std::string line = absl::StrFormat(
        "step %d/%d epoch %d loss %s accuracy %s samples/s %s lr %g", step, total_steps, epoch,
        FormatOptional(window.loss(), "%.4f"), FormatOptional(window.accuracy(), "%.4f"),
        FormatOptional(rate, "%.0f"), options_.lr);
    if (eval_accuracy.has_value()) {
      absl::StrAppend(&line, " eval_accuracy ", FormatOptional(*eval_accuracy, "%.4f"));
    }
    *context_.log << line << std::endl;
    if (first_window) result.first_loss = window.loss();
    first_window = false;
    result.loss = window.loss();
    result.accuracy = window.accuracy();
    window = Window();
    window.start = context_.clock->Now();
  };

  std::vector<int64_t> indices;  // This rank's order for `epoch`.
  int64_t epoch = -1;
  int64_t step = 0;
  while (step < total_steps) {
    if (context_.stop != nullptr && context_.stop->load()) {
      result.stopped = true;
      break;
    }
    if (step / steps_per_epoch != epoch) {
      epoch = step / steps_per_epoch;
      indices = sampler.EpochIndices(epoch);
    }
    const int64_t offset = (step % steps_per_epoch) * batch_size;
    const MnistBatch batch =
        train.GetBatch(absl::MakeConstSpan(indices).subspan(offset, batch_size));

    optimizer.zero_grad();
    const at::Tensor logits = model->forward(batch.inputs);
    const at::Tensor loss = torch::nn::functional::cross_entropy(logits, batch.targets);
    loss.backward();
    RETURN_IF_ERROR(AverageGradients(params, comm));
    optimizer.step();
    ++step;

    window.steps += 1;
    window.loss_sum += loss.item<double>();
    window.correct += logits.argmax(1).eq(batch.targets).sum().item<int64_t>();
    window.samples += batch_size;
    result.steps = step;
    result.epoch = epoch;

    const bool last = step == total_steps;
    if (step % options_.log_every == 0 || last) {
      const absl::Duration elapsed = context_.clock->Now() - window.start;
      std::optional<double> eval_accuracy;
      if (last && context_.test != nullptr) {
        ASSIGN_OR_RETURN(eval_accuracy, Evaluate(model));
        result.eval_accuracy = eval_accuracy;
      }
      emit(step, epoch, eval_accuracy, elapsed);
    }
  }
  if (result.stopped) {
    if (window.steps > 0) emit(step, epoch, std::nullopt, context_.clock->Now() - window.start);
    return result;
  }

  if (comm.rank() == 0 && !options_.checkpoint_dir.empty()) {
    NamedTensors named;
    for (const auto& item : model->named_parameters()) named.emplace_back(item.key(), item.value());
    const std::string path = options_.checkpoint_dir + "/" + kFinalCheckpointName;
    RETURN_IF_ERROR(SaveTensorDict(named, path));
    result.checkpoint_path = path;
  }
  return result;
}

absl::StatusOr<double> Trainer::Evaluate(Mlp& model) {
  const MnistDataset& test = *context_.test;
  Communicator& comm = *context_.comm;
  at::NoGradGuard no_grad;
  std::vector<int64_t> mine;  // Strided shard: rank, rank + world, ...
  for (int64_t i = comm.rank(); i < test.size(); i += comm.world_size()) mine.push_back(i);
  int64_t correct = 0;
  for (size_t begin = 0; begin < mine.size(); begin += kEvalChunk) {
    const size_t n = std::min<size_t>(kEvalChunk, mine.size() - begin);
    const MnistBatch batch = test.GetBatch(absl::MakeConstSpan(mine).subspan(begin, n));
    correct += model->forward(batch.inputs).argmax(1).eq(batch.targets).sum().item<int64_t>();
  }
  at::Tensor counts = at::empty({2}, at::kDouble);
  counts[0].fill_(static_cast<double>(correct));
  counts[1].fill_(static_cast<double>(mine.size()));
  RETURN_IF_ERROR(comm.AllReduceSum(counts));
  const double total = counts[1].item<double>();
  return total > 0 ? counts[0].item<double>() / total : kNaN;
}

}  // namespace baton::trainer
