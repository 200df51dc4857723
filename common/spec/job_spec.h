#pragma once

// Defaults and validation of a user's JobSpec. The coordinator runs both at submit time
// and is authoritative (only it can check trainer.data_dir on its file system); the CLI
// uses them for display only.

#include <string>

#include "absl/status/status.h"
#include "baton/v1/job.pb.h"

namespace baton {

// Largest values accepted by ValidateJobSpec (the trainer's are in
// common/spec/trainer_spec_defaults.h).
inline constexpr int kMaxWorkers = 10000;
inline constexpr int kMaxSlotsPerWorker = 64;
// Ranks of a job (workers x slots_per_worker, at workers.max): every one is in the job's
// record, which a WatchJob snapshot carries whole (about 60 bytes a rank).
inline constexpr int kMaxRanks = 65536;

// Returns `spec` with every unset field that has a documented default filled in:
//   slots_per_worker  1        (only when absent: an explicit 0 is kept, and rejected)
//   workers.max       workers.min (only when absent)
//   trainer (only when the program is the trainer): TrainerSpecWithDefaults
//     (common/spec/trainer_spec.h: every field's default from common/spec/trainer_spec_defaults.h).
//   restart_policy: see RestartPolicyWithDefaults.
//   preflight: see PreflightWithDefaults.
// Everything else is copied unchanged. Never fails.
baton::v1::JobSpec WithDefaults(baton::v1::JobSpec spec);

// Most workers the job may run on: workers.max, or workers.min when max is unset.
int MaxWorkers(const baton::v1::JobSpec& spec);
// Processes per worker: slots_per_worker, or 1 when unset (WithDefaults always sets it;
// the fallback guards specs that did not go through it).
int SlotsPerWorker(const baton::v1::JobSpec& spec);

// Whether the job's rank 0 checkpoints at its next step boundary and exits 75 when sent
// SIGUSR1 (the built-in trainer always; a command job when command.elastic is true), so a
// planned resize (drain, scale-up) can ask it to instead of stopping it.
bool CheckpointsOnRequest(const baton::v1::JobSpec& spec);

// JobSpec.preemptible, true when unset: whether a coordinator with queues may shrink or
// preempt the job to make room for another.
bool IsPreemptible(const baton::v1::JobSpec& spec);

// Defaults of a RestartPolicy (each only when absent; explicit zeros are kept):
//   max_infra_restarts 10, max_user_restarts 3, max_stall_restarts 3,
//   backoff_initial 0.5 s, backoff_max 30 s, stall_factor 3, stall_floor 1.5 s,
//   stall_unlearned 10 min, report_stall_floor 30 s (phase_timeouts and output_silence
//   stay unset: learned, off).
// WithDefaults applies it to spec.restart_policy; the coordinator also applies it to
// records stored before the policy existed. Never fails.
baton::v1::RestartPolicy RestartPolicyWithDefaults(baton::v1::RestartPolicy policy);

// Defaults of a Preflight (each only when absent): link_window 200 ms,
// min_bandwidth_fraction 0.5. The coordinator also applies it to records stored before
// the field existed. Never fails.
baton::v1::Preflight PreflightWithDefaults(baton::v1::Preflight preflight);

// Checks a spec that already went through WithDefaults. Returns OK or INVALID_ARGUMENT
// whose message is "<field path>: <what is wrong>; <what is allowed>", e.g.
//   "workers.max: 1 is less than workers.min (2); must be >= min".
// Only the first violation is reported, checking fields in this fixed order:
//   name; program (exactly one of trainer/command);
//   trainer: ValidateTrainerSpec (common/spec/trainer_spec.h: its fields in their order, ranges
//     from common/spec/trainer_spec_defaults.h, no file system access: the workers check a spec's
//     paths);
//   command.argv, command.argv[0], command.working_dir;
//   workers.min, workers.max; slots_per_worker; env (keys in sorted order);
//   checkpoint_dir (absolute; required when command.elastic); trainer.global_batch against every
//   world size (or trainer.accumulation_steps set beside it); checkpoint_dir required when the
//   trainer checkpoints on more than one worker; budget.max_steps, budget.max_epochs (ranges from
//   the trainer table), then the trainer's budget rule;
//   restart_policy.max_infra_restarts, .max_user_restarts, .max_stall_restarts (0..1000),
//     .backoff_max (0..1 h), .backoff_initial (0..backoff_max), .stall_factor (>= 1),
//     .stall_floor (>= 1 s), .phase_timeouts.{startup,step,eval,checkpoint,epoch} (0 or
//     1 s..7 d), .stall_unlearned, .report_stall_floor (1 s..7 d), .output_silence (0 or
//     1 s..7 d);
//   preflight.link_window (50 ms..10 s), .min_bandwidth_fraction (0..1);
//   queue (a name or empty), priority (a class name, an integer, or empty).
// Thread-safe.
absl::Status ValidateJobSpec(const baton::v1::JobSpec& spec);

// True for names Baton sets in every training process (RANK, WORLD_SIZE, MASTER_ADDR,
// ..., TORCHELASTIC_*, BATON_*), which a spec's env must not override.
bool IsReservedEnvName(const std::string& name);

}  // namespace baton
