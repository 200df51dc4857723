#include "worker/process/path_lookup.h"

#include <sys/stat.h>
#include <unistd.h>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace baton::worker {

bool IsExecutableFile(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return false;
  return ::access(path.c_str(), X_OK) == 0;
}

absl::StatusOr<std::string> FindExecutable(absl::string_view name, absl::string_view path_env) {
  if (name.empty()) return absl::InvalidArgumentError("empty program name");
  if (absl::StrContains(name, '/')) return std::string(name);
  for (absl::string_view dir : absl::StrSplit(path_env, ':')) {
    std::string candidate = absl::StrCat(dir.empty() ? "." : dir, "/", name);
    if (IsExecutableFile(candidate)) return candidate;
  }
  return absl::NotFoundError(absl::StrCat(name, ": command not found on PATH"));
}

std::string GetEnv(const std::vector<std::string>& env, absl::string_view name, bool* found) {
  std::string value;
  bool seen = false;
  for (const std::string& entry : env) {
    if (entry.size() > name.size() && entry[name.size()] == '=' && absl::StartsWith(entry, name)) {
      value = entry.substr(name.size() + 1);
      seen = true;
    }
  }
  if (found != nullptr) *found = seen;
  return value;
}

}  // namespace baton::worker
