#pragma once

// Whether a RUNNING job grows onto free workers (pure; the Coordinator gathers the facts
// and resizes: a planned restart at the larger size, after rank 0 checkpointed).

#include <string>
#include <vector>

#include "coordinator/policy/scheduler.h"

namespace baton::coordinator {

struct ScaleUpFacts {
  // The job checkpoints on request (the built-in trainer, an elastic command job): only
  // those grow without losing steps; others keep their size until their next restart.
  bool checkpoints_on_request = false;
  std::vector<std::string> current;  // the job's workers now
  int max_workers = 1;               // workers.max (defaults applied)
  int slots_per_worker = 1;
  // The generation is training: it reported a step and no worker is still re-attaching.
  bool training = false;
  // Every current worker is READY (else a restart or a drain of the job is coming anyway).
  bool current_ready = false;
  std::vector<WorkerCapacity> free;  // READY workers with their free slots, in order
};

// The workers that join (in `free`'s order, as many as fit below max_workers); empty: the
// job keeps its size.
std::vector<std::string> DecideScaleUp(const ScaleUpFacts& facts);

}  // namespace baton::coordinator
