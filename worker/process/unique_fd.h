#pragma once

#include <fcntl.h>
#include <unistd.h>

#include "absl/status/status.h"

namespace baton::worker {

// Owns one file descriptor and closes it on destruction. Move-only; not thread-safe.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { Reset(); }
  UniqueFd(UniqueFd&& other) noexcept : fd_(other.Release()) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(other.Release());
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  // Gives up ownership; the caller must close the returned fd.
  int Release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
  }
  // Closes the owned fd (if any) and takes ownership of `fd`.
  void Reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

 private:
  int fd_ = -1;
};

// Creates a pipe whose ends are both O_CLOEXEC; `read_flags`/`write_flags` may add O_NONBLOCK.
// Errors: INTERNAL with errno text (e.g. EMFILE).
absl::Status MakePipe(UniqueFd* read_end, UniqueFd* write_end, int read_flags = 0,
                      int write_flags = 0);

// Sets or clears O_NONBLOCK on `fd`.
absl::Status SetNonBlocking(int fd, bool non_blocking);

// Writes all of `size` bytes, retrying on EINTR and short writes. Errors: INTERNAL with errno.
absl::Status WriteAll(int fd, const void* data, size_t size);

}  // namespace baton::worker
