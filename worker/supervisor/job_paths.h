#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "baton/v1/job.pb.h"
#include "worker/process/fs_isolation.h"

namespace baton::worker {

// Where a job on this worker may keep its files.
struct PathPolicy {
  // The worker's work_dir (absolute). Under it a job may only use its own directory,
  // <work_dir>/jobs/<job_id>: never another job's, nor the worker's own files.
  std::string work_dir;
  // Further roots a job's paths may lie under (absolute; e.g. a shared checkpoint file
  // system), from --allowed_paths. The work_dir rule above applies inside them too.
  std::vector<std::string> allowed_roots;
  // The worker's own credentials (absolute file paths: its TLS key and certificate, the CA
  // bundle), wherever the operator keeps them, inside or outside the work_dir: hidden
  // from confined ranks whole (IsolationFor), so a rank can neither read nor replace them.
  std::vector<std::string> secret_files;
  // Where jobs keep in-memory snapshots (SupervisorOptions::snapshot_root; absolute, may be
  // empty): a job may use only <snapshot_root>/<snapshot_name> (IsolationFor).
  std::string snapshot_root;
  // The job's directory name under snapshot_root (snapshot_dirs.h: SnapshotDirs::DirName);
  // the job id when empty.
  std::string snapshot_name;
};

// Resolves `path` (absolute) the way the kernel would when the job creates it: component by
// component, an existing component through realpath (so symlinks are followed to where they
// really lead), a missing one and everything after it lexically ('.' dropped, '..' going
// up one level of the resolved path). Errors: INVALID_ARGUMENT for a relative path;
// FAILED_PRECONDITION when a component cannot be examined (e.g. EACCES).
// May block on a hung mount: call it off any loop.
absl::StatusOr<std::string> ResolvePath(const std::string& path);

// True if `path` is `root` or lies beneath it; both resolved, without a trailing '/'.
bool IsUnder(const std::string& path, const std::string& root);

// The job's own directory on this worker: <work_dir>/jobs/<job_id>.
std::string JobDir(const std::string& work_dir, const std::string& job_id);
// A rank's directory below its job's: gen-<generation>/rank-<rank> (its logs, and its
// working directory unless a command sets one).
std::string RankSubdir(int64_t generation, int32_t rank);
// The built-in trainer's `baton profile` directory below its rank's.
inline constexpr char kRankProfileSubdir[] = "profile";

// Checks every path a spec names (checkpoint_dir, command.working_dir, trainer.data_dir,
// trainer.sample_log, trainer.torchscript_path), resolved with ResolvePath, against `policy`: each must lie under the
// job's own directory or under an allowed root, and not under the work_dir outside the
// job's own directory. Errors: PERMISSION_DENIED "<field>: <path> (resolved: <real>) is
// not under ..." naming the allowed roots; what ResolvePath returns. Blocks like
// ResolvePath.
absl::Status CheckJobPaths(const baton::v1::JobSpec& spec, const std::string& job_id,
                           const PathPolicy& policy);

// The file system confinement of a rank of the job (see FsIsolation): the work_dir is
// hidden (other jobs' directories, the worker's own files) but for the job's directory, and
// so is each secret file (resolved: a symlink's target is what is hidden), and the
// snapshot_root but for the job's <snapshot_root>/<snapshot_name> (which must exist).
// Errors: those of ResolvePath.
absl::StatusOr<FsIsolation> IsolationFor(const std::string& job_id, const PathPolicy& policy);

}  // namespace baton::worker
