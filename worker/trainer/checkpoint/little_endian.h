#pragma once

// Little-endian integers in byte buffers (ZIP records, the checkpoint trailer, pickle
// operands), whatever the host's byte order.

#include <cstdint>

#include "absl/strings/string_view.h"

namespace baton::trainer {

// The unsigned integer whose little-endian bytes are `bytes` (at most 8 of them).
inline uint64_t LoadLittleEndian(absl::string_view bytes) {
  uint64_t v = 0;
  for (size_t i = bytes.size(); i-- > 0;) v = v << 8 | static_cast<unsigned char>(bytes[i]);
  return v;
}

// Writes the low `bytes` bytes of `v` at `p`, least significant first.
inline void StoreLittleEndian(char* p, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) p[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

}  // namespace baton::trainer
