#pragma once

// How the shared-memory collectives (comm/shm_communicator.h) cut a tensor into pieces, one
// piece per parity buffer of a slot (shm_segment.h), and a piece into the chunks its host's
// ranks each reduce. Pure arithmetic: every rank with the same options cuts the same pieces,
// with or without a segment (the hosts' leaders must match piece for piece), and the same
// chunks. Inline: the collectives call these for every piece, in their inner loops.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace baton::trainer {

// Chunk boundaries inside a piece fall on multiples of this many elements (cache lines).
inline constexpr int64_t kShmChunkAlign = 16;

// Elements of `element_size` bytes in one piece, half a slot of `slot_bytes`: a multiple of
// kShmChunkAlign, at least kShmChunkAlign (which fits half of any slot ValidateShmOptions
// accepts, for elements of at most 8 bytes).
inline int64_t ShmPieceElements(size_t slot_bytes, int64_t element_size) {
  const int64_t n = static_cast<int64_t>(slot_bytes / 2) / element_size;
  return std::max<int64_t>(kShmChunkAlign, n / kShmChunkAlign * kShmChunkAlign);
}

// Chunk `index` of a piece of `len` elements split between `members` ranks: [begin, end),
// boundaries on multiples of kShmChunkAlign; the last chunk takes the rest (any may be
// empty). The chunks of indices 0 .. members - 1 cover [0, len) in order, without overlap.
inline std::pair<int64_t, int64_t> ShmChunkOf(int64_t len, int index, int members) {
  const int64_t begin = len * index / members / kShmChunkAlign * kShmChunkAlign;
  const int64_t end =
      index == members - 1 ? len : len * (index + 1) / members / kShmChunkAlign * kShmChunkAlign;
  return {begin, end};
}

}  // namespace baton::trainer
