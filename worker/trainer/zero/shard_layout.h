#pragma once

// How ZeRO (issue 14) cuts a model's parameters into one shard per data-parallel rank.
//
// The parameters, in a fixed order (the same on every rank), are laid end to end in one
// flat buffer: parameter i occupies [param_offset(i), param_offset(i) + numels[i]). The
// buffer is padded at the end to padded_numel() = world_size * shard_numel(), where
// shard_numel() is the smallest multiple of `align` with world_size * shard_numel() >=
// total_numel(). Rank r's shard is [r * shard_numel(), (r + 1) * shard_numel()): the
// chunk r of a reduce-scatter or all-gather over the buffer (comm/communicator.h). The
// padding (always at the end, so only the last ranks' shards hold any) is never a
// parameter's element: gradients there are zeros, optimizer state there is meaningless and
// dropped when re-cut.
//
// A parameter may straddle shards, and a shard may hold pieces of many parameters, or
// none (padding only, or an empty model). Pieces(r) lists what rank r's shard holds.
//
// Elastic restore: a flat state buffer (e.g. Adam's moments) saved as the shards of a job
// of N ranks is re-cut for M ranks by RecutSources/RecutShard; only the parameters' numels
// must match. Plain values; thread-compatible.

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace baton::trainer {

// A run of one parameter's elements inside one shard.
struct ShardPiece {
  int param = 0;             // Index into the layout's numels.
  int64_t param_offset = 0;  // First element within the parameter (flattened).
  int64_t shard_offset = 0;  // Where it lies within the shard.
  int64_t length = 0;        // Elements, > 0.

  bool operator==(const ShardPiece& o) const {
    return param == o.param && param_offset == o.param_offset && shard_offset == o.shard_offset &&
           length == o.length;
  }
};

// A run of a re-cut shard's elements and where the saved shards hold them.
struct RecutSource {
  int from_rank = 0;        // The saved shard (rank of the old layout).
  int64_t from_offset = 0;  // Within that saved shard.
  int64_t to_offset = 0;    // Within the new shard.
  int64_t length = 0;       // Elements, > 0.

  bool operator==(const RecutSource& o) const {
    return from_rank == o.from_rank && from_offset == o.from_offset && to_offset == o.to_offset &&
           length == o.length;
  }
};

class ShardLayout {
 public:
  // The layout of parameters of `numels` elements over `world_size` ranks, each shard a
  // multiple of `align` elements (e.g. 16 floats: shards start on 64-byte boundaries).
  // INVALID_ARGUMENT if world_size < 1, align < 1 or a numel is negative; OUT_OF_RANGE if
  // the padded buffer would not fit in int64.
  static absl::StatusOr<ShardLayout> Create(std::vector<int64_t> numels, int world_size,
                                            int64_t align = 1);

  int world_size() const { return world_size_; }
  int64_t align() const { return align_; }
  const std::vector<int64_t>& numels() const { return numels_; }
  int num_params() const { return static_cast<int>(numels_.size()); }
  // Sum of the numels: the buffer without padding.
  int64_t total_numel() const { return total_; }
  int64_t shard_numel() const { return shard_; }
  int64_t padded_numel() const { return shard_ * world_size_; }
  // Padding elements at the end of the buffer: fewer than world_size() * align().
  int64_t padding() const { return padded_numel() - total_; }
  // Where parameter i starts in the flat buffer. Requires 0 <= i < num_params().
  int64_t param_offset(int i) const { return offsets_[i]; }
  // Where rank r's shard starts in the flat buffer.
  int64_t shard_begin(int rank) const { return rank * shard_; }
  // Elements of rank r's shard that belong to parameters (the rest is padding, at its end).
  int64_t shard_real_numel(int rank) const;

  // The parameter pieces of rank `rank`'s shard, in buffer order (by shard_offset);
  // parameters with no elements never appear. Requires 0 <= rank < world_size().
  std::vector<ShardPiece> Pieces(int rank) const;

 private:
  ShardLayout(std::vector<int64_t> numels, std::vector<int64_t> offsets, int world_size,
              int64_t align, int64_t total, int64_t shard)
      : numels_(std::move(numels)),
        offsets_(std::move(offsets)),
        world_size_(world_size),
        align_(align),
        total_(total),
        shard_(shard) {}

  std::vector<int64_t> numels_;
  std::vector<int64_t> offsets_;  // offsets_[i] = sum of numels_[0..i).
  int world_size_;
  int64_t align_;
  int64_t total_;
  int64_t shard_;
};

// Where the real (non-padding) elements of rank `rank`'s shard in layout `to` come from in
// the shards saved under layout `from`, in to_offset order, contiguous from 0 to
// to.shard_real_numel(rank); the rest of the new shard is padding. FAILED_PRECONDITION if
// the layouts' numels differ (state saved for other parameters); INVALID_ARGUMENT if rank
// is not in `to`.
absl::StatusOr<std::vector<RecutSource>> RecutSources(const ShardLayout& from,
                                                      const ShardLayout& to, int rank);

// Rank `rank`'s shard of a flat state buffer under layout `to` (to.shard_numel() values,
// padding set to `pad`), built from `saved`, the from.world_size() shards written under
// layout `from` (each from.shard_numel() values, padding ignored). Errors as RecutSources,
// and INVALID_ARGUMENT if `saved` does not have from's shape.
template <typename T>
absl::StatusOr<std::vector<T>> RecutShard(const ShardLayout& from,
                                          const std::vector<std::vector<T>>& saved,
                                          const ShardLayout& to, int rank, T pad = T()) {
  if (static_cast<int>(saved.size()) != from.world_size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "re-cut: ", saved.size(), " saved shards, the layout has ", from.world_size()));
  }
  for (size_t r = 0; r < saved.size(); ++r) {
    if (static_cast<int64_t>(saved[r].size()) != from.shard_numel()) {
      return absl::InvalidArgumentError(absl::StrCat("re-cut: saved shard ", r, " has ",
                                                     saved[r].size(), " elements, not ",
                                                     from.shard_numel()));
    }
  }
  absl::StatusOr<std::vector<RecutSource>> sources = RecutSources(from, to, rank);
  if (!sources.ok()) return sources.status();
  std::vector<T> shard(static_cast<size_t>(to.shard_numel()), pad);
  for (const RecutSource& s : *sources) {
    const auto begin = saved[s.from_rank].begin() + s.from_offset;
    std::copy(begin, begin + s.length, shard.begin() + s.to_offset);
  }
  return shard;
}

}  // namespace baton::trainer
