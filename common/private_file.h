#pragma once

// Files and directories that belong to one job or one daemon: created 0700 (directories)
// and 0600 (files), never through a symbolic link. The umask can only narrow these modes.

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace baton {

inline constexpr unsigned kPrivateDirMode = 0700;
inline constexpr unsigned kPrivateFileMode = 0600;

// mkdir -p whose created directories are 0700 (existing ones are left as they are). The
// last component must end up a directory, not a symlink to one. Errors:
// FAILED_PRECONDITION naming the directory and the OS error.
absl::Status MakePrivateDirs(const std::string& path);

// open(2) of `path` with O_NOFOLLOW | O_CLOEXEC added (a symlink as the last component
// fails with ELOOP) and mode 0600 when O_CREAT creates it. Returns the fd, or -1 with errno.
int OpenPrivate(const std::string& path, int flags);

// Creates `path` for writing, exclusively (O_CREAT | O_EXCL | O_NOFOLLOW, 0600): a file
// another process planted there in advance, or a symlink, is never opened. Whatever is in
// the way (a temporary file left by a crash, a planted symlink) is unlinked once, without
// being followed, and the creation retried. Returns the fd (O_WRONLY | O_CLOEXEC).
// Errors: FAILED_PRECONDITION naming the file and the OS error.
absl::StatusOr<int> CreateExclusive(const std::string& path);

}  // namespace baton
