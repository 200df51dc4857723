#include "tools/fuzz/mutator.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace baton::fuzz {
namespace {

// Values at the edges of integer ranges, as libFuzzer's "interesting values".
constexpr uint64_t kInteresting[] = {0,          1,          0x7f,       0x80,
                                     0xff,       0x7fff,     0x8000,     0xffff,
                                     0x7fffffff, 0x80000000, 0xffffffff, ~uint64_t{0}};

// A position in [0, size) (size > 0).
size_t Pos(const std::string& data, trainer::Prng& rng) { return rng.Below(data.size()); }

// Overwrites up to `width` bytes at a random position with an interesting value,
// little- or big-endian.
void SetInteresting(std::string& data, trainer::Prng& rng) {
  const size_t width = size_t{1} << rng.Below(4);  // 1, 2, 4 or 8 bytes.
  uint64_t value = kInteresting[rng.Below(std::size(kInteresting))];
  const size_t at = Pos(data, rng);
  const size_t n = std::min(width, data.size() - at);
  const bool big_endian = rng.Below(2) == 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t shift = 8 * (big_endian ? n - 1 - i : i);
    data[at + i] = static_cast<char>((value >> shift) & 0xff);
  }
}

// Inserts a copy of a range of `from` at a random position of `data`.
void InsertRange(std::string& data, const std::string& from, trainer::Prng& rng) {
  if (from.empty()) return;
  const size_t begin = Pos(from, rng);
  const size_t length = 1 + rng.Below(std::min<size_t>(from.size() - begin, 64));
  data.insert(data.empty() ? 0 : Pos(data, rng), from, begin, length);
}

void EditOnce(std::string& data, const std::vector<std::string>& others, trainer::Prng& rng) {
  const uint64_t kind = data.empty() ? 0 : rng.Below(8);  // Only an insertion grows "".
  switch (kind) {
    case 0:  // Insert random bytes.
      data.insert(data.empty() ? 0 : Pos(data, rng), 1 + rng.Below(8),
                  static_cast<char>(rng.Next()));
      break;
    case 1:  // Splice in a range of another input (or of this one).
      InsertRange(data, others.empty() ? data : others[rng.Below(others.size())], rng);
      break;
    case 2:  // Flip one bit.
      data[Pos(data, rng)] ^= static_cast<char>(1u << rng.Below(8));
      break;
    case 3:  // Set one byte.
      data[Pos(data, rng)] = static_cast<char>(rng.Next());
      break;
    case 4:
      SetInteresting(data, rng);
      break;
    case 5: {  // Erase a range.
      const size_t at = Pos(data, rng);
      data.erase(at, 1 + rng.Below(std::min<size_t>(data.size() - at, 64)));
      break;
    }
    case 6:  // Duplicate a range of itself.
      InsertRange(data, std::string(data), rng);
      break;
    default:  // Truncate.
      data.resize(Pos(data, rng));
      break;
  }
}

}  // namespace

void Mutate(std::string& data, const std::vector<std::string>& others, size_t max_size,
            trainer::Prng& rng) {
  const uint64_t edits = 1 + rng.Below(4);
  for (uint64_t i = 0; i < edits; ++i) EditOnce(data, others, rng);
  if (data.size() > max_size) data.resize(max_size);
}

}  // namespace baton::fuzz
