#include "common/private_file.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace baton {

absl::Status MakePrivateDirs(const std::string& path) {
  for (size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    const std::string partial = path.substr(0, i);
    if (::mkdir(partial.c_str(), kPrivateDirMode) != 0 && errno != EEXIST) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot create directory ", partial, ": ", ::strerror(errno)));
    }
  }
  struct stat st;
  std::string last = path;
  while (last.size() > 1 && last.back() == '/') last.pop_back();
  if (::lstat(last.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(path, " is not a directory (a symbolic link is not accepted)"));
  }
  return absl::OkStatus();
}

int OpenPrivate(const std::string& path, int flags) {
  int fd;
  do {
    fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC, kPrivateFileMode);
  } while (fd < 0 && errno == EINTR);
  return fd;
}

absl::StatusOr<int> CreateExclusive(const std::string& path) {
  const int flags = O_WRONLY | O_CREAT | O_EXCL;
  int fd = OpenPrivate(path, flags);
  if (fd < 0 && errno == EEXIST && ::unlink(path.c_str()) == 0) fd = OpenPrivate(path, flags);
  if (fd < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create ", path, ": ", ::strerror(errno)));
  }
  return fd;
}

}  // namespace baton
