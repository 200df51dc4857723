#pragma once

// Full training-state checkpoints: everything needed to resume training bit-for-bit.
//
// Files. Rank 0 of generation g (BATON_GENERATION) writes
// <dir>/ckpt-<step, 8+ digits>-g<g>.pt (e.g. ckpt-00000120-g3.pt) with WriteFileAtomically,
// then prunes (below). Generation 0 (unknown: a run outside Baton) writes the legacy name
// ckpt-<step>.pt. Restore reads both forms; a legacy file counts as generation 0. Two
// generations never write the same file. Each file is a sealed archive (checkpoint_file.h:
// a ZIP + length/CRC-32 trailer) holding a pickled dict that Python's torch.load(path)
// reads; its keys are listed in checkpoint_codec.h. The names and the start records below
// are read and judged by checkpoint_listing.h.
//
// Generations (split-brain safety). In a network partition a superseded generation's rank 0
// may keep running beside its successor, writing into the same directory. The rule:
//   A writer of an older generation cannot replace or delete files of a newer one, and
//   restore never picks a stale generation's file written after the newer one started.
// * Start records. Rank 0 of generation g >= 1 calls RecordStart after its restore and
//   before training: <dir>/gen-<g, 8+ digits>.start (e.g. gen-00000003.start), written
//   atomically and once, holds the job and the step g resumed from (0 if none) as four text
//   lines: "baton-generation-start-v1", "job <job id>", "generation <g>",
//   "resumed_step <step>".
// * Stale files. Checkpoint (g, s) is stale iff the start record of some generation g' > g
//   holds a resumed step < s: a fork the newer lineage did not adopt.
// * Fencing. Generation g is superseded once a start record of any g' > g of its job, or
//   any record of another job, exists (see "Jobs" below). Its
//   writer then refuses (FAILED_PRECONDITION naming g') to commit a checkpoint, to write
//   its start record or final weights (SaveWeights) and to delete anything. Each write
//   checks right before its rename and again after it: a checkpoint renamed just as g'
//   started is removed again when its step is beyond g''s resumed step (it is stale by the
//   rule anyway), a start record renamed just as a newer one appeared is removed again.
//   The check before a rename races with a start record being written; for checkpoints the
//   names and the stale rule make that harmless; final.pt, one name for every generation,
//   can still be replaced by a stale writer within that window. And g' becomes visible
//   only with its record, after its restore: until then g still commits and prunes, which
//   deletes the file g' restored only if g commits `keep` newer ones meanwhile.
// * Pruning, after each commit of step s by generation g, and only while no newer
//   generation has started: of the files of generations <= g (never a newer one), the stale
//   ones and those of steps after s (an abandoned timeline: skipped as corrupt at restore,
//   or an earlier run's) go; of the rest, the newest `keep` by (step, generation) stay.
//   Temporary files of other (dead) writers of generations <= g go too. Start records of
//   the newest 4 generations stay; an older one goes unless it is the only record that
//   makes some remaining file stale (one that could not be deleted). Every deletion is
//   checked against the fence first.
// * Generation 0 writes no start record, so a directory without start records behaves as
//   before generations existed. A generation-0 writer in a directory that has start records
//   is superseded like any older generation.
// * Jobs. Generations are numbered per job, so a directory serves one job at a time. A job
//   that starts in a directory an earlier job used restores that job's newest checkpoint
//   (it continues its training, as before generations) and adopts the directory: its
//   RecordStart removes the earlier job's start records, and from then on its own fence a
//   writer of the earlier job, should one still run (a record of another job supersedes).
//   The earlier job's checkpoints stay: they are older than anything the new job writes,
//   but pruning never deletes files of a generation above the writer's own.
//
// Restore. Every rank calls RestoreLatest at start: it tries the non-stale step checkpoints
// newest first (by step, then the higher generation) and loads the first one that passes
// the trailer check AND decodes; files failing either are skipped with a warning (never
// loaded). Temporary files are never considered.
// All ranks see the same files, so they pick the same checkpoint; a loop that wants to be
// defensive can all-reduce the restored step and fail on disagreement.
//
// RNG. Save captures the calling process's generators (rank 0's); Restore sets every
// restoring process's generators to them. Rank-dependent random streams therefore need
// to be derived from (seed, rank, step) by the caller, not kept in the global generator.
//
// Threading: a CheckpointManager has no mutable state after Create; its methods may be
// called from one thread at a time per directory and generation (the training loop's).
// Every decision is taken from the directory as listed at that moment; nothing is cached.
// Save blocks on serialisation and fsync; EncodeCheckpoint + CommitCheckpoint split the
// CPU part from the disk part so a caller can move the latter to a background thread (the
// tensors are copied during encoding, so training may continue meanwhile).
//
// Errors: no exceptions escape (LibTorch's c10::Error is converted).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/spec/trainer_spec_defaults.h"
#include "worker/trainer/checkpoint/checkpoint_listing.h"
#include "worker/trainer/checkpoint/training_state.h"

namespace baton::trainer {

struct CheckpointManagerOptions {
  std::string dir;               // Created on the first save if missing. Non-empty.
  // TrainerSpec.checkpoint_every; 0: ShouldSave is false.
  int64_t checkpoint_every = trainer_spec::kCheckpointEvery.default_value;
  // TrainerSpec.keep_checkpoints; its range: common/spec/trainer_spec_defaults.h.
  int32_t keep = static_cast<int32_t>(trainer_spec::kKeepCheckpoints.default_value);
  int64_t generation = 0;        // BATON_GENERATION; 0 = unknown (legacy names). >= 0.
  std::string job;               // BATON_JOB_ID; empty outside Baton.
};

struct RestoreOptions {
  // Set the CPU/CUDA generators from the checkpoint. (rng_extra is always returned.)
  bool restore_rng = true;
};

// Which checkpoint RestoreLatest loaded, and which it skipped.
struct RestoredCheckpoint {
  std::string path;
  int64_t step = 0;
  int64_t generation = 0;            // Of the file (0 for a legacy name).
  std::vector<std::string> skipped;  // Newer files rejected as corrupt, with the reason.
  std::vector<std::string> stale;    // Files ignored as stale, with the start record why.
};

class CheckpointManager {
 public:
  // INVALID_ARGUMENT for an empty dir, checkpoint_every or keep outside TrainerSpec's range
  // (common/spec/trainer_spec_defaults.h; the message names trainer.<field>) or generation < 0.
  static absl::StatusOr<CheckpointManager> Create(CheckpointManagerOptions options);

  // True when `step` (completed optimizer steps, > 0) is a multiple of checkpoint_every.
  bool ShouldSave(int64_t step) const;

  // EncodeCheckpoint + CommitCheckpoint. Returns the written path. Rank 0 only.
  absl::StatusOr<std::string> Save(const TrainingState& state) const;

  // The sealed file contents for `state`, with the calling process's RNG states.
  // INVALID_ARGUMENT on duplicate/empty tensor names or undefined tensors.
  absl::StatusOr<std::vector<char>> EncodeCheckpoint(const TrainingState& state) const;

  // Writes `sealed` (from EncodeCheckpoint) as the checkpoint of `step` atomically, then
  // prunes as described at the top. Returns the path.
  //   FAILED_PRECONDITION: this generation is superseded (the message names the newer
  //     one). Nothing was written, or the file was removed again if it is stale. The
  //     caller must stop training.
  //   INTERNAL: an I/O error (the directory cannot be listed, or the write failed).
  absl::StatusOr<std::string> CommitCheckpoint(int64_t step, const std::vector<char>& sealed) const;

  // Records that this generation started from `resumed_step` (0 when nothing was restored):
  // rank 0 calls it once, after RestoreLatest and before training. Removes other jobs'
  // start records first (the job adopts the directory). A no-op for generation 0, and when
  // this generation's record exists already (it is never rewritten).
  //   FAILED_PRECONDITION: a newer generation of this job has started (named); this one must
  //     not train.
  //   INVALID_ARGUMENT: resumed_step < 0. INTERNAL: an I/O error.
  absl::Status RecordStart(int64_t resumed_step) const;

  // The free SaveWeights below, fenced like a commit: FAILED_PRECONDITION naming the newer
  // generation instead of writing when this generation is superseded, and also when it
  // turns out to be superseded right after the rename (the file is then written).
  absl::Status SaveWeights(const NamedTensors& tensors, const std::string& path) const;

  // Restores the newest valid, non-stale checkpoint into `state` (progress, tensors in
  // place, optimizer state; RNG per `options`). The optimizer keeps its current
  // hyperparameters (lr, momentum, betas, ...): only its per-parameter state is loaded.
  //   NOT_FOUND: no valid checkpoint (none, or all corrupt or stale): start from scratch.
  //   FAILED_PRECONDITION: a valid checkpoint does not fit `state` (missing/extra tensor
  //     names, shape or dtype change, other optimizer type or parameter count), or the
  //     newest is of a format this trainer refuses to load (v1, checkpoint_codec.h).
  //     `state` is unchanged.
  //   INVALID_ARGUMENT: duplicate names in state.tensors. `state` is unchanged.
  //   INTERNAL: loading failed part-way; `state` is unspecified, the caller must exit. Or
  //     the directory cannot be listed; `state` is unchanged.
  //   DATA_LOSS: a start record does not parse (they are never written torn, so someone
  //     edited it) and staleness cannot be judged; `state` is unchanged.
  absl::StatusOr<RestoredCheckpoint> RestoreLatest(TrainingState& state,
                                                   const RestoreOptions& options = {}) const;

  // The newest non-stale checkpoint file, the first RestoreLatest would try (nullopt: none),
  // from the listing alone: nothing is read or verified, so RestoreLatest may still load an
  // older one. INTERNAL when the directory cannot be listed; DATA_LOSS as RestoreLatest.
  absl::StatusOr<std::optional<CheckpointFile>> NewestRestorable() const;

  // Restores one specific checkpoint file (no fallback). DATA_LOSS if it is corrupt,
  // otherwise as RestoreLatest.
  absl::Status RestoreFrom(const std::string& path, TrainingState& state,
                           const RestoreOptions& options = {}) const;

  // Every checkpoint file in the directory (any generation; valid, corrupt or stale),
  // ascending by (step, generation). Empty when the directory cannot be listed.
  std::vector<CheckpointFile> ListCheckpoints() const;

  // The distinct steps of ListCheckpoints(), ascending.
  std::vector<int64_t> ListSteps() const;

  // Where this manager's generation writes `step`: <dir>/ckpt-<step>-g<generation>.pt, or
  // <dir>/ckpt-<step>.pt for generation 0.
  std::string PathForStep(int64_t step) const;

  const CheckpointManagerOptions& options() const { return options_; }

 private:
  explicit CheckpointManager(CheckpointManagerOptions options) : options_(std::move(options)) {}

  // FAILED_PRECONDITION naming the record that supersedes this generation, if one exists: a
  // newer generation of this job or, unless `same_job_only`, another job's (`what` ends the
  // message: what is refused, or what happened); INTERNAL if the directory cannot be
  // listed, DATA_LOSS if a start record does not parse.
  absl::Status CheckNotSuperseded(absl::string_view what, bool same_job_only = false) const;
  // WriteFileAtomically of `path`, refused with CheckNotSuperseded(refused) right before
  // the rename. A write that fails otherwise while this generation is superseded reports
  // the supersession (a newer writer may have removed the temporary file).
  absl::Status WriteFenced(const std::string& path, absl::string_view contents,
                           absl::string_view refused) const;
  // Right after a checkpoint of `step` was renamed to `path`: OK unless a newer generation
  // has started; then removes the file if that makes it stale and returns
  // FAILED_PRECONDITION.
  absl::Status CheckCommitted(int64_t step, const std::string& path) const;
  // Deletes `path` unless this generation is superseded: then FAILED_PRECONDITION as
  // CheckNotSuperseded; INTERNAL if the removal fails.
  absl::Status RemoveUnlessSuperseded(const std::string& path) const;
  // The pruning described at the top, after the commit of `step`. Best effort: failures
  // are logged, never returned.
  void Prune(int64_t committed_step) const;

  CheckpointManagerOptions options_;
};

// Final weights: a pickled Dict[str, Tensor] (name -> detached contiguous CPU tensor)
// written atomically to `path`, which Python's torch.load returns as a dict (the format
// of today's final.pt). INVALID_ARGUMENT on duplicate names.
absl::Status SaveWeights(const NamedTensors& tensors, const std::string& path);

}  // namespace baton::trainer
