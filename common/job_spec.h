#pragma once

// Defaults and validation of a user's JobSpec. The coordinator runs both at submit time
// and is authoritative (only it can check trainer.data_dir on its file system); the CLI
// uses them for display only.

#include <string>

#include "absl/status/status.h"
#include "proto/baton/v1/job.pb.h"

namespace baton {

// Largest values accepted by ValidateJobSpec.
inline constexpr int kMaxWorkers = 1024;
inline constexpr int kMaxSlotsPerWorker = 64;
inline constexpr int kMaxBatchSize = 65536;
inline constexpr int kMaxHiddenLayers = 16;
inline constexpr int kMaxHiddenWidth = 65536;
inline constexpr int kMaxTrainerThreads = 256;

// Returns `spec` with every unset field that has a documented default filled in:
//   slots_per_worker  1        (only when absent: an explicit 0 is kept, and rejected)
//   workers.max       workers.min (only when absent)
//   trainer (only when the program is the trainer):
//     batch_size 64, lr 0.05, momentum 0.9, seed 1, hidden [256, 128], log_every 10,
//     threads 1.
// The trainer's fields other than momentum are proto3 scalars without presence, so "unset"
// means zero (or an empty list); momentum has presence, so an explicit 0 (plain SGD) is kept.
// Everything else is copied unchanged. Never fails.
baton::v1::JobSpec WithDefaults(baton::v1::JobSpec spec);

// Checks a spec that already went through WithDefaults. Returns OK or INVALID_ARGUMENT
// whose message is "<field path>: <what is wrong>; <what is allowed>", e.g.
//   "workers.max: 1 is less than workers.min (2); must be >= min".
// Only the first violation is reported, checking fields in this fixed order:
//   name; program (exactly one of trainer/command);
//   trainer.model, .dataset, .data_dir, .batch_size, .lr, .momentum, .hidden (count, then
//     each width in order), .log_every, .threads;
//   command.argv, command.argv[0], command.working_dir;
//   workers.min, workers.max; slots_per_worker; env (keys in sorted order);
//   checkpoint_dir; budget.max_steps, budget.max_epochs, then the trainer's budget rule.
// trainer.data_dir is checked on the local file system: it must be an absolute, readable
// directory holding the dataset's files (for mnist: train-images-idx3-ubyte and
// train-labels-idx1-ubyte). Thread-safe.
absl::Status ValidateJobSpec(const baton::v1::JobSpec& spec);

// True for names Baton sets in every training process (RANK, WORLD_SIZE, MASTER_ADDR,
// ..., TORCHELASTIC_*, BATON_*), which a spec's env must not override.
bool IsReservedEnvName(const std::string& name);

}  // namespace baton
