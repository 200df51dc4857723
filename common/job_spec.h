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
//     threads 1, precision "fp32", accumulation_steps 1, bucket_cap_mb 25,
//     grad_compression "none", optimizer "sgd", adam_beta1 0.9, adam_beta2 0.999,
//     adam_eps 1e-8, lr_schedule "constant", lr_gamma 0.1, loader_threads 2,
//     prefetch_batches 4, image_size 224 (only for dataset image_folder; 0 lets the trainer
//     pick the dataset's default), context_length 128, synthetic_samples 8192,
//     num_classes 10, gpt_layers 4, gpt_heads 4, gpt_width 256, vocab_size 50304,
//     task "classification", keep_checkpoints 3.
//     max_grad_norm, weight_decay, nesterov, warmup_steps, lr_step_size, min_lr,
//     base_batch and checkpoint_every default to 0/false, which needs no filling.
//   restart_policy: see RestartPolicyWithDefaults.
// Trainer fields without presence are proto3 scalars, so "unset" means zero (or empty);
// fields with presence (momentum, adam_beta1, adam_beta2, adam_eps, lr_gamma) keep an
// explicit 0.
// Everything else is copied unchanged. Never fails.
baton::v1::JobSpec WithDefaults(baton::v1::JobSpec spec);

// Most workers the job may run on: workers.max, or workers.min when max is unset.
int MaxWorkers(const baton::v1::JobSpec& spec);
// Processes per worker: slots_per_worker, or 1 when unset (WithDefaults always sets it;
// the fallback guards specs that did not go through it).
int SlotsPerWorker(const baton::v1::JobSpec& spec);

// Defaults of a RestartPolicy (each only when absent; explicit zeros are kept):
//   max_infra_restarts 10, max_user_restarts 3, max_stall_restarts 3,
//   backoff_initial 0.5 s, backoff_max 30 s, stall_factor 10, stall_floor 30 s.
// WithDefaults applies it to spec.restart_policy; the coordinator also applies it to
// records stored before the policy existed. Never fails.
baton::v1::RestartPolicy RestartPolicyWithDefaults(baton::v1::RestartPolicy policy);

// Checks a spec that already went through WithDefaults. Returns OK or INVALID_ARGUMENT
// whose message is "<field path>: <what is wrong>; <what is allowed>", e.g.
//   "workers.max: 1 is less than workers.min (2); must be >= min".
// Only the first violation is reported, checking fields in this fixed order:
//   name; program (exactly one of trainer/command);
//   trainer.model, .dataset, .data_dir, .batch_size, .lr, .momentum, .hidden (count, then
//     each width in order), .log_every, .threads, .precision, .accumulation_steps,
//     .bucket_cap_mb, .grad_compression, .max_grad_norm, .optimizer, .weight_decay,
//     .nesterov, .adam_beta1, .adam_beta2, .adam_eps, .lr_schedule, .warmup_steps,
//     .lr_step_size, .lr_gamma, .min_lr, .base_batch, .loader_threads, .prefetch_batches,
//     .image_size, .context_length, .synthetic_samples, .num_classes, .gpt_layers,
//     .gpt_heads, .gpt_width (also: divisible by gpt_heads), .vocab_size,
//     .torchscript_path, .task, then model/dataset compatibility (reported on
//     trainer.dataset for a language model on image data, on trainer.model for a
//     classifier on token data), .checkpoint_every, .keep_checkpoints;
//   command.argv, command.argv[0], command.working_dir;
//   workers.min, workers.max; slots_per_worker; env (keys in sorted order);
//   checkpoint_dir; trainer.global_batch against every world size (or
//   trainer.accumulation_steps set beside it); checkpoint_dir required when the trainer
//   checkpoints on more than one worker; budget.max_steps, budget.max_epochs, then the
//   trainer's budget rule;
//   restart_policy.max_infra_restarts, .max_user_restarts, .max_stall_restarts (0..1000),
//     .backoff_max (0..1 h), .backoff_initial (0..backoff_max), .stall_factor (>= 1),
//     .stall_floor (>= 1 s).
// trainer.data_dir is checked on the local file system: for "synthetic" it must be empty;
// otherwise an absolute, readable directory holding the dataset's files: mnist
// train-images-idx3-ubyte and train-labels-idx1-ubyte; cifar10 data_batch_1.bin (in the
// directory or its cifar-10-batches-bin/); tokens train.bin; image_folder at least one
// sub-directory (one per class). trainer.torchscript_path (model "torchscript" only) must
// be an absolute, readable file. Thread-safe.
absl::Status ValidateJobSpec(const baton::v1::JobSpec& spec);

// True for names Baton sets in every training process (RANK, WORLD_SIZE, MASTER_ADDR,
// ..., TORCHELASTIC_*, BATON_*), which a spec's env must not override.
bool IsReservedEnvName(const std::string& name);

}  // namespace baton
