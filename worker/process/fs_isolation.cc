#include "worker/process/fs_isolation.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <mutex>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace baton::worker {
namespace {

// Rights newer than Debian 12's <linux/landlock.h> (ABI 3 and 5).
constexpr uint64_t kTruncate = 1ULL << 14;
constexpr uint64_t kIoctlDev = 1ULL << 15;
// The rights that apply to a file, not only to a directory.
constexpr uint64_t kFileRights = LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_WRITE_FILE |
                                 LANDLOCK_ACCESS_FS_READ_FILE | kTruncate | kIoctlDev;

// Every file system right of Landlock ABI `abi`.
uint64_t HandledRights(int abi) {
  uint64_t rights = (LANDLOCK_ACCESS_FS_MAKE_SYM << 1) - 1;  // ABI 1: bits 0..12.
  if (abi >= 2) rights |= LANDLOCK_ACCESS_FS_REFER;
  if (abi >= 3) rights |= kTruncate;
  if (abi >= 5) rights |= kIoctlDev;
  return rights;
}

bool IsUnderOrAt(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (absl::StartsWith(path, root) && path[root.size()] == '/');
}

std::string Child(const std::string& dir, const char* name) {
  return dir == "/" ? absl::StrCat("/", name) : absl::StrCat(dir, "/", name);
}

class RulesetBuilder {
 public:
  RulesetBuilder(int ruleset, uint64_t rights, const std::vector<std::string>& hidden)
      : ruleset_(ruleset), rights_(rights), hidden_(hidden) {}

  // Grants everything beneath `path` (a file gets its file rights only). A path that
  // vanished meanwhile is skipped.
  absl::Status Allow(const std::string& path) {
    UniqueFd fd(::open(path.c_str(), O_PATH | O_CLOEXEC));
    if (!fd.valid()) {
      if (errno == ENOENT) return absl::OkStatus();
      return absl::FailedPreconditionError(
          absl::StrCat("cannot open ", path, ": ", ::strerror(errno)));
    }
    struct stat st;
    if (::fstat(fd.get(), &st) != 0) return absl::InternalError(::strerror(errno));
    landlock_path_beneath_attr attr{};
    attr.allowed_access = S_ISDIR(st.st_mode) ? rights_ : (rights_ & kFileRights);
    attr.parent_fd = fd.get();
    if (::syscall(SYS_landlock_add_rule, ruleset_, LANDLOCK_RULE_PATH_BENEATH, &attr, 0) != 0) {
      return absl::InternalError(
          absl::StrCat("landlock_add_rule(", path, "): ", ::strerror(errno)));
    }
    return absl::OkStatus();
  }

  // Grants `dir` (a directory or a file) whole if no hidden tree lies in it; nothing if it
  // is in one (or is one); else lists it and covers each entry the same way.
  absl::Status Cover(const std::string& dir) {
    bool contains_hidden = false;
    for (const std::string& h : hidden_) {
      if (IsUnderOrAt(dir, h)) return absl::OkStatus();
      contains_hidden = contains_hidden || IsUnderOrAt(h, dir);
    }
    if (!contains_hidden) return Allow(dir);
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) {
      return absl::FailedPreconditionError(
          absl::StrCat("cannot list ", dir, ": ", ::strerror(errno)));
    }
    absl::Status status;
    while (struct dirent* e = ::readdir(d)) {
      if (::strcmp(e->d_name, ".") == 0 || ::strcmp(e->d_name, "..") == 0) continue;
      const std::string child = Child(dir, e->d_name);
      struct stat st;
      if (::lstat(child.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
      status = Cover(child);  // A hidden file is skipped there like a hidden directory.
      if (!status.ok()) break;
    }
    ::closedir(d);
    return status;
  }

 private:
  const int ruleset_;
  const uint64_t rights_;
  const std::vector<std::string>& hidden_;
};

}  // namespace

absl::StatusOr<UniqueFd> BuildLandlockRuleset(const FsIsolation& isolation) {
  const long abi =
      ::syscall(SYS_landlock_create_ruleset, nullptr, 0, LANDLOCK_CREATE_RULESET_VERSION);
  if (abi < 1) {
    return absl::UnimplementedError(
        absl::StrCat("Landlock is not available in this kernel: ", ::strerror(errno)));
  }
  const uint64_t rights = HandledRights(static_cast<int>(abi));
  landlock_ruleset_attr attr{};
  attr.handled_access_fs = rights;
  UniqueFd ruleset(
      static_cast<int>(::syscall(SYS_landlock_create_ruleset, &attr, sizeof(attr), 0)));
  if (!ruleset.valid()) {
    return absl::InternalError(absl::StrCat("landlock_create_ruleset: ", ::strerror(errno)));
  }
  RulesetBuilder builder(ruleset.get(), rights, isolation.hidden);
  if (absl::Status s = builder.Cover("/"); !s.ok()) return s;
  for (const std::string& path : isolation.exceptions) {
    if (absl::Status s = builder.Allow(path); !s.ok()) return s;
  }
  return ruleset;
}

absl::StatusOr<UniqueFd> LauncherRuleset(const FsIsolation& isolation) {
  if (isolation.empty()) return UniqueFd();
  absl::StatusOr<UniqueFd> built = BuildLandlockRuleset(isolation);
  if (!absl::IsUnimplemented(built.status())) return built;
  static std::once_flag warned;
  std::call_once(warned, [&] {
    BATON_LOG(WARNING) << built.status().message()
                       << "; ranks run without file system confinement";
  });
  return UniqueFd();
}

}  // namespace baton::worker
