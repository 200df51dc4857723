#include "worker/supervisor/job_paths.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace baton::worker {
namespace {

// `dir` (resolved) without its last component; "/" stays "/".
std::string Parent(const std::string& dir) {
  const size_t slash = dir.rfind('/');
  return slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
}

std::string Join(const std::string& dir, absl::string_view name) {
  return dir == "/" ? absl::StrCat("/", name) : absl::StrCat(dir, "/", name);
}

// One allowed area and how to name it in an error.
struct Area {
  std::string root;
  std::string label;
};

}  // namespace

absl::StatusOr<std::string> ResolvePath(const std::string& path) {
  if (path.empty() || path[0] != '/') {
    return absl::InvalidArgumentError(absl::StrCat("\"", path, "\" is not an absolute path"));
  }
  std::string current = "/";
  bool exists = true;  // Whether `current` exists (so its children may too).
  for (absl::string_view name : absl::StrSplit(path, '/', absl::SkipEmpty())) {
    if (name == ".") continue;
    if (name == "..") {
      current = Parent(current);  // `current` is resolved, so its parent is its real one.
      struct stat st;
      exists = ::stat(current.c_str(), &st) == 0;
      continue;
    }
    const std::string next = Join(current, name);
    struct stat st;
    if (!exists || ::lstat(next.c_str(), &st) != 0) {
      if (exists && errno != ENOENT) {
        return absl::FailedPreconditionError(
            absl::StrCat("cannot examine ", next, ": ", ::strerror(errno)));
      }
      current = next;
      exists = false;
      continue;
    }
    char real[PATH_MAX];
    if (::realpath(next.c_str(), real) == nullptr) {
      if (errno != ENOENT) {  // ENOENT: a dangling symlink, which creating would follow.
        return absl::FailedPreconditionError(
            absl::StrCat("cannot resolve ", next, ": ", ::strerror(errno)));
      }
      return absl::FailedPreconditionError(
          absl::StrCat(next, " is a symbolic link to a path that does not exist"));
    }
    current = real;
  }
  return current;
}

bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") return true;
  return path == root || (absl::StartsWith(path, root) && path[root.size()] == '/');
}

std::string JobDir(const std::string& work_dir, const std::string& job_id) {
  return absl::StrCat(work_dir, "/jobs/", job_id);
}

std::string RankSubdir(int64_t generation, int32_t rank) {
  return absl::StrCat("gen-", generation, "/rank-", rank);
}

absl::Status CheckJobPaths(const baton::v1::JobSpec& spec, const std::string& job_id,
                           const PathPolicy& policy) {
  ASSIGN_OR_RETURN(const std::string work_dir, ResolvePath(policy.work_dir));
  const std::string job_dir = JobDir(work_dir, job_id);
  std::vector<Area> areas = {{job_dir, "the job's directory " + job_dir}};
  for (const std::string& root : policy.allowed_roots) {
    ASSIGN_OR_RETURN(std::string resolved, ResolvePath(root));
    areas.push_back({std::move(resolved), root});
  }
  std::vector<std::string> labels;
  for (const Area& a : areas) labels.push_back(a.label);

  const std::pair<const char*, const std::string*> fields[] = {
      {"checkpoint_dir", &spec.checkpoint_dir()},
      {"command.working_dir", &spec.command().working_dir()},
      {"trainer.data_dir", &spec.trainer().data_dir()},
      {"trainer.sample_log", &spec.trainer().sample_log()},
      {"trainer.torchscript_path", &spec.trainer().torchscript_path()},
  };
  for (const auto& [field, path] : fields) {
    if (path->empty()) continue;
    absl::StatusOr<std::string> real = ResolvePath(*path);
    if (!real.ok()) {
      return absl::Status(real.status().code(), absl::StrCat(field, ": ", real.status().message()));
    }
    bool allowed = false;
    for (const Area& a : areas) allowed = allowed || IsUnder(*real, a.root);
    if (IsUnder(*real, work_dir) && !IsUnder(*real, job_dir)) allowed = false;
    if (!allowed) {
      return absl::PermissionDeniedError(absl::StrCat(
          field, ": ", *path, *real == *path ? "" : absl::StrCat(" (resolved: ", *real, ")"),
          " is not under an allowed path of this worker (", absl::StrJoin(labels, ", "),
          "; under the worker's work_dir only the job's own directory)"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<FsIsolation> IsolationFor(const std::string& job_id, const PathPolicy& policy) {
  ASSIGN_OR_RETURN(const std::string work_dir, ResolvePath(policy.work_dir));
  FsIsolation isolation;
  isolation.hidden.push_back(work_dir);
  isolation.exceptions.push_back(JobDir(work_dir, job_id));
  for (const std::string& secret : policy.secret_files) {
    ASSIGN_OR_RETURN(std::string real, ResolvePath(secret));
    isolation.hidden.push_back(std::move(real));
  }
  if (!policy.snapshot_root.empty()) {
    ASSIGN_OR_RETURN(const std::string root, ResolvePath(policy.snapshot_root));
    if (!IsUnder(root, work_dir)) isolation.hidden.push_back(root);
    isolation.exceptions.push_back(
        absl::StrCat(root, "/", policy.snapshot_name.empty() ? job_id : policy.snapshot_name));
  }
  return isolation;
}

}  // namespace baton::worker
