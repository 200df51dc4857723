#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::worker {

// True if `path` names a regular file the current user may execute.
bool IsExecutableFile(const std::string& path);

// Resolves a program name the way execvp(3) does: a name containing '/' is returned unchanged
// (a relative one is resolved later against the child's working directory); otherwise the
// first directory of `path_env` (colon-separated, an empty entry meaning ".") that holds an
// executable regular file of that name. Errors: NOT_FOUND naming the program;
// INVALID_ARGUMENT for an empty name.
absl::StatusOr<std::string> FindExecutable(absl::string_view name, absl::string_view path_env);

// The value of `name` in an environment given as "KEY=VALUE" entries (the last entry wins),
// or "" if absent; `found` (optional) tells the two cases apart.
std::string GetEnv(const std::vector<std::string>& env, absl::string_view name,
                   bool* found = nullptr);

}  // namespace baton::worker
