#include "worker/process/unique_fd.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>

#include "absl/strings/str_cat.h"

namespace baton::worker {

absl::Status MakePipe(UniqueFd* read_end, UniqueFd* write_end, int read_flags, int write_flags) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat("pipe2: ", std::strerror(errno)));
  }
  read_end->Reset(fds[0]);
  write_end->Reset(fds[1]);
  if (read_flags & O_NONBLOCK) {
    absl::Status s = SetNonBlocking(fds[0], true);
    if (!s.ok()) return s;
  }
  if (write_flags & O_NONBLOCK) return SetNonBlocking(fds[1], true);
  return absl::OkStatus();
}

absl::Status SetNonBlocking(int fd, bool non_blocking) {
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return absl::InternalError(absl::StrCat("fcntl: ", std::strerror(errno)));
  const int wanted = non_blocking ? (flags | O_NONBLOCK) : (flags & ~O_NONBLOCK);
  if (wanted != flags && ::fcntl(fd, F_SETFL, wanted) != 0) {
    return absl::InternalError(absl::StrCat("fcntl: ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status WriteAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("write: ", std::strerror(errno)));
    }
    p += n;
    size -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace baton::worker
