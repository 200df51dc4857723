#include "worker/trainer/zero/shard_layout.h"

#include <algorithm>
#include <limits>

namespace baton::trainer {

absl::StatusOr<ShardLayout> ShardLayout::Create(std::vector<int64_t> numels, int world_size,
                                                int64_t align) {
  if (world_size < 1) {
    return absl::InvalidArgumentError(absl::StrCat("shard layout: world size ", world_size));
  }
  if (align < 1) {
    return absl::InvalidArgumentError(absl::StrCat("shard layout: alignment ", align));
  }
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  std::vector<int64_t> offsets;
  offsets.reserve(numels.size());
  int64_t total = 0;
  for (size_t i = 0; i < numels.size(); ++i) {
    if (numels[i] < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("shard layout: parameter ", i, " has ", numels[i], " elements"));
    }
    if (numels[i] > kMax - total) {
      return absl::OutOfRangeError("shard layout: more than 2^63 elements");
    }
    offsets.push_back(total);
    total += numels[i];
  }
  // shard = ceil(total / world) rounded up to a multiple of align, without overflow.
  int64_t shard = total / world_size + (total % world_size != 0 ? 1 : 0);
  if (shard % align != 0) {
    if (shard > kMax - align) return absl::OutOfRangeError("shard layout: padding overflows");
    shard += align - shard % align;
  }
  if (shard > kMax / world_size) return absl::OutOfRangeError("shard layout: padding overflows");
  return ShardLayout(std::move(numels), std::move(offsets), world_size, align, total, shard);
}

int64_t ShardLayout::shard_real_numel(int rank) const {
  const int64_t begin = shard_begin(rank);
  return std::clamp<int64_t>(total_ - begin, 0, shard_);
}

std::vector<ShardPiece> ShardLayout::Pieces(int rank) const {
  std::vector<ShardPiece> pieces;
  const int64_t begin = shard_begin(rank);
  const int64_t end = begin + shard_real_numel(rank);
  if (begin >= end) return pieces;
  // The last parameter starting at or before `begin` (empty ones share offsets: skip them).
  int i = static_cast<int>(std::upper_bound(offsets_.begin(), offsets_.end(), begin) -
                           offsets_.begin()) -
          1;
  for (; i < num_params() && offsets_[i] < end; ++i) {
    const int64_t from = std::max(begin, offsets_[i]);
    const int64_t to = std::min(end, offsets_[i] + numels_[i]);
    if (to <= from) continue;  // Empty, or ends before the shard.
    pieces.push_back(ShardPiece{i, from - offsets_[i], from - begin, to - from});
  }
  return pieces;
}

absl::StatusOr<std::vector<RecutSource>> RecutSources(const ShardLayout& from,
                                                      const ShardLayout& to, int rank) {
  if (from.numels() != to.numels()) {
    return absl::FailedPreconditionError(
        absl::StrCat("re-cut: the saved state is of ", from.num_params(), " parameters of ",
                     from.total_numel(), " elements, the model has ", to.num_params(), " of ",
                     to.total_numel(), " (or their sizes differ)"));
  }
  if (rank < 0 || rank >= to.world_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("re-cut: rank ", rank, " not in world of ", to.world_size()));
  }
  std::vector<RecutSource> sources;
  const int64_t begin = to.shard_begin(rank);
  const int64_t end = begin + to.shard_real_numel(rank);
  // Walk the old shards overlapping [begin, end) of the flat buffer (same in both layouts).
  for (int64_t pos = begin; pos < end;) {
    const int old_rank = static_cast<int>(pos / from.shard_numel());
    const int64_t old_end = from.shard_begin(old_rank) + from.shard_numel();
    const int64_t len = std::min(end, old_end) - pos;
    sources.push_back(RecutSource{old_rank, pos - from.shard_begin(old_rank), pos - begin, len});
    pos += len;
  }
  return sources;
}

}  // namespace baton::trainer
