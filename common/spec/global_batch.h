#pragma once

// trainer.global_batch: how a global batch is split over a gang, the one rule both submit's
// validation (every world size the job may run at) and baton-trainer (the world it runs
// at) apply. Plain C++ and Abseil.

#include <cstdint>

#include "absl/status/statusor.h"

namespace baton {

// Each rank's share G / W of a global batch G on W ranks, in `accumulation_steps`
// micro-batches of `micro_batch` samples: the largest micro-batch not above the job's
// batch size that divides the share.
struct GlobalBatchSplit {
  int64_t micro_batch = 0;
  int64_t accumulation_steps = 0;
};

// INVALID_ARGUMENT (naming the numbers) unless global_batch > 0 is a multiple of
// world_size > 0 and max_micro_batch > 0.
absl::StatusOr<GlobalBatchSplit> SplitGlobalBatch(int64_t global_batch, int64_t world_size,
                                                  int64_t max_micro_batch);

}  // namespace baton
