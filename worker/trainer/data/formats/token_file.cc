#include "worker/trainer/data/formats/token_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "worker/trainer/data/formats/file_util.h"

namespace baton::trainer {

absl::StatusOr<std::unique_ptr<TokenFile>> TokenFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, ": not a regular file"));
  }
  const auto length = static_cast<size_t>(st.st_size);
  if (length == 0) {
    ::close(fd);
    return absl::DataLossError(absl::StrCat(path, ": empty token file"));
  }
  if (length % 2 != 0) {
    ::close(fd);
    return absl::DataLossError(absl::StrFormat(
        "%s: %d bytes is not a whole number of uint16 tokens (truncated?)", path, length));
  }
  void* map = ::mmap(nullptr, length, PROT_READ, MAP_SHARED, fd, 0);
  const int err = errno;
  ::close(fd);  // The mapping keeps the file.
  if (map == MAP_FAILED) {
    return absl::FailedPreconditionError(absl::StrCat(path, ": mmap failed: ", std::strerror(err)));
  }
  return std::unique_ptr<TokenFile>(new TokenFile(path, static_cast<const uint8_t*>(map), length));
}

TokenFile::~TokenFile() { ::munmap(const_cast<uint8_t*>(bytes_), length_); }

// On little-endian hosts the mapping (page-aligned) is the uint16 array itself.
constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

void TokenFile::Copy(int64_t begin, absl::Span<int64_t> out) const {
  if constexpr (kLittleEndian) {
    const auto* tokens = reinterpret_cast<const uint16_t*>(bytes_) + begin;
    std::copy(tokens, tokens + out.size(), out.begin());
  } else {
    for (size_t k = 0; k < out.size(); ++k) out[k] = at(begin + static_cast<int64_t>(k));
  }
}

uint16_t TokenFile::MaxToken() const {
  uint16_t max = 0;
  if constexpr (kLittleEndian) {
    const auto* tokens = reinterpret_cast<const uint16_t*>(bytes_);
    for (int64_t i = 0; i < size_; ++i) max = std::max(max, tokens[i]);  // Vectorises.
  } else {
    for (int64_t i = 0; i < size_; ++i) max = std::max(max, at(i));
  }
  return max;
}

absl::Status WriteTokenFile(const std::string& path, absl::Span<const uint16_t> tokens) {
  std::string bytes;
  bytes.reserve(2 * tokens.size());
  for (uint16_t t : tokens) {
    bytes.push_back(static_cast<char>(t & 0xff));
    bytes.push_back(static_cast<char>(t >> 8));
  }
  return WriteWholeFile(path, bytes);
}

}  // namespace baton::trainer
