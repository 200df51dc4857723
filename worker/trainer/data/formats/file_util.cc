#include "worker/trainer/data/formats/file_util.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "common/private_file.h"
#include "common/status_macros.h"

namespace baton::trainer {

absl::StatusOr<ReadableFile> ReadableFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::FailedPreconditionError(absl::StrCat(path, ": cannot open: ", std::strerror(err)));
  }
  struct stat st {};
  const bool stat_ok = ::fstat(fd, &st) == 0;
  if (stat_ok && S_ISDIR(st.st_mode)) {
    ::close(fd);
    return absl::FailedPreconditionError(absl::StrCat(path, ": is a directory, not a file"));
  }
  return ReadableFile(path, fd,
                      stat_ok && S_ISREG(st.st_mode)
                          ? std::optional<uint64_t>(static_cast<uint64_t>(st.st_size))
                          : std::nullopt);
}

ReadableFile::~ReadableFile() {
  if (fd_ >= 0) ::close(fd_);
}

ReadableFile::ReadableFile(ReadableFile&& other) noexcept
    : path_(std::move(other.path_)), fd_(other.fd_), size_(other.size_) {
  other.fd_ = -1;
}

absl::StatusOr<size_t> ReadableFile::ReadAt(char* out, size_t size, uint64_t offset) const {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd_, out + done, size - done, static_cast<off_t>(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(path_, ": read error: ", std::strerror(errno)));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

absl::StatusOr<std::string> ReadableFile::ReadRest() {
  // One read into a buffer of the file's size (a dataset is tens of MiB: no stream copies);
  // more if it grew or has no size (a pipe).
  std::string contents(size_.has_value() ? static_cast<size_t>(*size_) + 1 : 1 << 16, '\0');
  size_t size = 0;
  for (;;) {
    if (size == contents.size()) contents.resize(contents.size() * 2);
    const ssize_t n = ::read(fd_, contents.data() + size, contents.size() - size);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      return absl::FailedPreconditionError(
          absl::StrCat(path_, ": read error: ", std::strerror(errno)));
    }
    if (n == 0) break;
    size += static_cast<size_t>(n);
  }
  contents.resize(size);
  return contents;
}

absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  ASSIGN_OR_RETURN(ReadableFile file, ReadableFile::Open(path));
  return file.ReadRest();
}

absl::Status WriteWholeFile(const std::string& path, absl::string_view bytes) {
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    if (absl::Status made = MakePrivateDirs(parent.string()); !made.ok()) {
      return absl::InternalError(made.message());
    }
  }
  // A temporary file created exclusively (0600, never through a symlink), then renamed
  // over `path`: a symlink planted at `path` is replaced, not written through.
  const std::string tmp = absl::StrCat(path, ".tmp-", ::getpid());
  absl::StatusOr<int> fd = CreateExclusive(tmp);
  if (!fd.ok()) return absl::InternalError(fd.status().message());
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(*fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  const int err = done == bytes.size() ? 0 : errno;
  ::close(*fd);
  if (err != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
    const int why = err != 0 ? err : errno;
    ::unlink(tmp.c_str());
    return absl::InternalError(absl::StrCat(path, ": write failed: ", std::strerror(why)));
  }
  return absl::OkStatus();
}

}  // namespace baton::trainer
