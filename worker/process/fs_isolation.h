#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {

// What of the file system a training process may not touch: `hidden` trees (the worker's
// work_dir with every job's directory, the roots of --allowed_paths), except the
// `exceptions` inside them (its own job directory, the paths its spec names). Everything
// outside the hidden trees stays fully accessible. All paths absolute and resolved.
struct FsIsolation {
  std::vector<std::string> hidden;
  std::vector<std::string> exceptions;

  bool empty() const { return hidden.empty(); }
};

// Builds a Landlock ruleset (Linux >= 5.13) enforcing `isolation`: every file system access
// right the kernel knows is handled, and granted beneath every path outside the hidden
// trees (found by listing, from "/", the directories on the way to each hidden tree:
// their other entries are granted whole) and beneath each exception. The ancestors of a
// hidden tree themselves cannot be listed; entries created in them after the ruleset was
// built are not accessible. Symlinks get no rule of their own (an access through one is
// checked where it leads). The caller passes the fd to landlock_restrict_self(2) in the
// child, after prctl(PR_SET_NO_NEW_PRIVS). Errors: UNIMPLEMENTED when the kernel has no
// Landlock (or it is disabled); FAILED_PRECONDITION naming a path that cannot be opened
// or listed; INTERNAL for other system call failures. May block on a hung mount.
absl::StatusOr<UniqueFd> BuildLandlockRuleset(const FsIsolation& isolation);

// The ruleset a launcher confines a process with: BuildLandlockRuleset's, an invalid fd when
// `isolation` is empty, or an invalid fd when the kernel has no Landlock (logged once per
// process: ranks then run unconfined). Errors: the other errors of BuildLandlockRuleset.
absl::StatusOr<UniqueFd> LauncherRuleset(const FsIsolation& isolation);

}  // namespace baton::worker
