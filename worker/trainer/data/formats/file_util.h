#pragma once

// Whole-file reads and writes with statuses that name the file. No LibTorch.
// Thread-safe (no shared state).

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {

// A file open for reading, closed on destruction; errors name it. Move-only.
class ReadableFile {
 public:
  // NOT_FOUND if `path` does not exist, FAILED_PRECONDITION if it cannot be opened or is a
  // directory.
  static absl::StatusOr<ReadableFile> Open(const std::string& path);
  ~ReadableFile();
  ReadableFile(ReadableFile&& other) noexcept;
  ReadableFile& operator=(ReadableFile&&) = delete;
  ReadableFile(const ReadableFile&) = delete;
  ReadableFile& operator=(const ReadableFile&) = delete;

  // Its size in bytes when it is a regular file (then ReadAt works), else nullopt (a pipe:
  // only ReadRest).
  std::optional<uint64_t> size() const { return size_; }
  // Up to `size` bytes at `offset` into `out`, fewer only at the end of the file.
  // FAILED_PRECONDITION on a read error.
  absl::StatusOr<size_t> ReadAt(char* out, size_t size, uint64_t offset) const;
  // Everything from the current position on, read in order (into one buffer of the
  // file's size where it has one). FAILED_PRECONDITION on a read error.
  absl::StatusOr<std::string> ReadRest();

 private:
  ReadableFile(std::string path, int fd, std::optional<uint64_t> size)
      : path_(std::move(path)), fd_(fd), size_(size) {}

  std::string path_;
  int fd_;
  std::optional<uint64_t> size_;
};

// The bytes of `path`. NOT_FOUND if it does not exist, FAILED_PRECONDITION if it cannot be
// opened or read (a directory, no permission).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Replaces `path` with `bytes`, creating missing parent directories. INTERNAL on failure.
absl::Status WriteWholeFile(const std::string& path, absl::string_view bytes);

}  // namespace baton::trainer
