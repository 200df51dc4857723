#pragma once

// Token files: a flat array of little-endian uint16 token ids (nanoGPT's train.bin /
// val.bin), memory-mapped read-only so that multi-GB corpora cost no heap.
//
// Plain C++ (no LibTorch). A TokenFile is immutable after Open; its const methods are
// thread-safe.

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace baton::trainer {

class TokenFile {
 public:
  // Maps `path`. NOT_FOUND if it does not exist, FAILED_PRECONDITION if it cannot be
  // opened or mapped, DATA_LOSS if it is empty or has an odd number of bytes.
  static absl::StatusOr<std::unique_ptr<TokenFile>> Open(const std::string& path);

  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::string& path() const { return path_; }
  // Number of tokens.
  int64_t size() const { return size_; }
  // Token i, i in [0, size()).
  uint16_t at(int64_t i) const {
    return static_cast<uint16_t>(bytes_[2 * i] | (uint16_t{bytes_[2 * i + 1]} << 8));
  }
  // Copies tokens [begin, begin + out.size()) into `out`; the range must be inside the file.
  void Copy(int64_t begin, absl::Span<int64_t> out) const;
  // The largest id in the file (reads all of it).
  uint16_t MaxToken() const;

 private:
  TokenFile(std::string path, const uint8_t* bytes, size_t length)
      : path_(std::move(path)), bytes_(bytes), length_(length), size_(length / 2) {}

  const std::string path_;
  const uint8_t* const bytes_;  // The mapping, length_ bytes.
  const size_t length_;
  const int64_t size_;
};

// Writes `tokens` as a token file (creating parent directories). INTERNAL on I/O errors.
absl::Status WriteTokenFile(const std::string& path, absl::Span<const uint16_t> tokens);

}  // namespace baton::trainer
