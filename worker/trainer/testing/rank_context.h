#pragma once

// Test helper: the TrainerContext of one rank of a gang in the trainer's tests (ranks as
// threads, comm/testing/test_ranks.h), with its metrics disabled and its log kept here.
// Header-only, testonly.

#include <cstdint>
#include <sstream>

#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/contract/metrics_writer.h"
#include "worker/trainer/data/dataset.h"
#include "worker/trainer/testing/ticking_clock.h"
#include "worker/trainer/trainer_options.h"

namespace baton::trainer::testing {

// `train`, `comm` and `clock` must outlive the run; so must this object (the context points
// into it). Callers add what a test needs (test split, snapshots, checkpoint requests).
struct RankContext {
  RankContext(const Dataset& train, Communicator& comm, TickingClock& clock, int64_t generation) {
    context.train = &train;
    context.comm = &comm;
    context.metrics = &metrics;
    context.clock = &clock;
    context.log = &log;
    context.generation = generation;
  }
  RankContext(const RankContext&) = delete;
  RankContext& operator=(const RankContext&) = delete;

  MetricsWriter metrics;  // Disabled.
  std::ostringstream log;
  TrainerContext context;
};

}  // namespace baton::trainer::testing
