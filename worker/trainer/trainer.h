#pragma once

// The training loop of the built-in trainer: data-parallel SGD of an MLP on an MNIST-format
// dataset, one process per rank.
//
// Per step every rank: takes its next batch from the DistributedSampler, runs forward +
// cross-entropy + backward, averages gradients over ranks (AverageGradients: one flat
// all-reduce), and applies SGD with momentum. Every rank therefore holds identical weights
// after each step (they start identical: seeded init, then a broadcast from rank 0).
// Metric lines: see contract.h. After the last step the t10k set, if present, is evaluated
// with every rank scoring a strided shard and one all-reduce of (correct, count); then
// rank 0 saves the weights to <checkpoint_dir>/final.pt.
//
// Threading: Run() is called once, on one thread; it borrows everything in TrainerContext.

#include <atomic>
#include <cstdint>
#include <optional>
#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/clock.h"
#include "worker/trainer/communicator.h"
#include "worker/trainer/data/idx_dataset.h"
#include "worker/trainer/metrics_writer.h"
#include "worker/trainer/models/mlp.h"

namespace baton::trainer {

struct TrainerOptions {
  std::vector<int64_t> hidden = {256, 128};  // MLP hidden widths; input/output from the data.
  int64_t batch_size = 64;                   // Per rank.
  double lr = 0.05;
  double momentum = 0.9;
  uint64_t seed = 1;           // Model init and data order.
  int64_t log_every = 10;      // Steps between metric lines.
  int64_t max_steps = 0;       // 0 = no limit.
  int64_t max_epochs = 0;      // 0 = no limit. At least one of max_steps/max_epochs is > 0.
  std::string checkpoint_dir;  // Rank 0 writes final.pt here; empty = no checkpoint.
};

// INVALID_ARGUMENT naming the flag when an option is out of range.
absl::Status ValidateTrainerOptions(const TrainerOptions& options);

// Borrowed collaborators; all must outlive Trainer::Run().
struct TrainerContext {
  const MnistDataset* train = nullptr;  // Required.
  const MnistDataset* test = nullptr;   // Optional (no eval_accuracy when null).
  Communicator* comm = nullptr;         // Required; LocalCommunicator for one process.
  MetricsWriter* metrics = nullptr;     // Required (may be disabled).
  const Clock* clock = nullptr;         // Required; times samples_per_sec.
  std::ostream* log = nullptr;          // Required; one human-readable line per metric line.
  // Optional. When it becomes true the loop stops before the next step, writes a metric line
  // for the steps since the last one, and returns with `stopped` set, without evaluation,
  // checkpoint or further collectives.
  const std::atomic<bool>* stop = nullptr;
};

struct TrainResult {
  int64_t steps = 0;  // Optimizer steps completed.
  int64_t epoch = 0;  // 0-based epoch of the last step.
  // Averages over the first and the last metric window of this rank (NaN if no step ran).
  double first_loss = 0;
  double loss = 0;
  double accuracy = 0;
  std::optional<double> eval_accuracy;
  std::string checkpoint_path;  // Empty unless this rank saved one.
  bool stopped = false;         // Ended early by TrainerContext::stop.
};

class Trainer {
 public:
  Trainer(TrainerOptions options, TrainerContext context);

  // Trains to the budget. Errors: INVALID_ARGUMENT for bad options or a dataset too small
  // for world_size x batch_size, UNAVAILABLE when a collective fails, INTERNAL for LibTorch
  // errors or a failed checkpoint write. A failed metrics write is logged and not fatal.
  absl::StatusOr<TrainResult> Run();

 private:
  absl::StatusOr<TrainResult> RunOrThrow();
  // Accuracy on the test set, identical on every rank (collective).
  absl::StatusOr<double> Evaluate(Mlp& model);

  const TrainerOptions options_;
  const TrainerContext context_;
};

}  // namespace baton::trainer
