#pragma once

// Where a pipeline-parallel run keeps its checkpoints, and the check that a checkpoint
// directory holds checkpoints of the same number of stages as the run about to restore.
//
// Layout: stage s of S has a checkpoint directory of its own,
// <checkpoint_dir>/pipeline-<S>-stage-<s>, managed by a CheckpointManager as a run without
// pipeline manages <checkpoint_dir> (the same file names, generations and start records),
// written by the stage's replica 0 and read by all its replicas. A run without pipeline
// (S = 1) keeps its files in <checkpoint_dir> itself. A checkpoint of one S therefore never
// looks like one of another S; CheckCheckpointLayout refuses to start over it instead of
// silently starting from step 0 beside it.

#include <string>

#include "absl/status/status.h"

namespace baton::trainer::pipeline {

// "<dir>/pipeline-<stages>-stage-<stage>".
std::string StageCheckpointDir(const std::string& dir, int stage, int stages);

// OK when `dir` is missing or holds no checkpoints, or only checkpoints of `stages` stages
// (stages == 1: files "ckpt-*.pt" in dir itself; else in its pipeline-<stages>-stage-*
// directories). FAILED_PRECONDITION naming both stage counts when it holds checkpoints of
// another number of stages; INTERNAL when it cannot be listed.
absl::Status CheckCheckpointLayout(const std::string& dir, int stages);

}  // namespace baton::trainer::pipeline
