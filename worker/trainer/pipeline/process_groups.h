#pragma once

// The communicators of a pipeline-parallel world: W ranks as W / S pipelines of S stages.
// Rank r is stage r % S of pipeline (replica) r / S. Each pipeline has a communicator of its
// own for the activations and gradients between its stages (rank = stage), and each stage
// one for the gradient average over its replicas (rank = replica). The Communicator
// interface has no sub-communicators, so both are built as separate groups through
// prefixes of the job's store ("pipeline/pp<replica>/", "pipeline/dp<stage>/"), with the
// backend `make` builds (Gloo, shared memory, ...).
//
// Every rank creates its pipeline's group first, then its stage's: the pipeline groups are
// disjoint and complete as their stages join, so no rank waits on a group whose members
// wait elsewhere.

#include <functional>
#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "worker/trainer/comm/communicator.h"

namespace baton::trainer::pipeline {

// Builds rank `rank` of a group of `world` ranks through `store` (e.g. CreateGlooCommunicator
// with fixed options).
using GroupFactory = std::function<absl::StatusOr<std::unique_ptr<Communicator>>(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world)>;

struct PipelineGroups {
  int stage = 0;
  int replica = 0;
  // This pipeline's stages (rank == stage, world == stages).
  std::unique_ptr<Communicator> pipeline;
  // This stage's replicas (rank == replica); null when there is one pipeline.
  std::unique_ptr<Communicator> data_parallel;
};

// Blocks until both of this rank's groups are built. INVALID_ARGUMENT unless 1 <= stages,
// world a multiple of stages and 0 <= rank < world; otherwise the errors of `make`.
absl::StatusOr<PipelineGroups> CreatePipelineGroups(const c10::intrusive_ptr<c10d::Store>& store,
                                                    int rank, int world, int stages,
                                                    const GroupFactory& make);

}  // namespace baton::trainer::pipeline
