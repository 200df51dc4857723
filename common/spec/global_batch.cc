#include "common/spec/global_batch.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace baton {

absl::StatusOr<GlobalBatchSplit> SplitGlobalBatch(int64_t global_batch, int64_t world_size,
                                                  int64_t max_micro_batch) {
  if (global_batch <= 0 || world_size <= 0 || global_batch % world_size != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "global batch ", global_batch, " cannot be split evenly over ", world_size, " ranks"));
  }
  if (max_micro_batch <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("micro-batch limit must be > 0, got ", max_micro_batch));
  }
  const int64_t share = global_batch / world_size;
  GlobalBatchSplit split;
  for (int64_t b = std::min(share, max_micro_batch); b >= 1; --b) {
    if (share % b == 0) {
      split.micro_batch = b;
      break;
    }
  }
  split.accumulation_steps = share / split.micro_batch;
  return split;
}

}  // namespace baton
