#pragma once

// The directories where the ranks of each job keep their in-memory snapshots on this worker
// (BATON_SNAPSHOT_DIR; baton-trainer: worker/trainer/snapshot/snapshot_store.h):
// <root>/<name>, <name> = DirName(job id, creation time), made 0700 on a rank's launch and
// kept across the job's generations, because a restarted gang restores from what its
// predecessors left there. A rank may use only its own job's (job_paths.h: IsolationFor).
// The creation time is in the name because job ids are unique within one coordinator's
// state only: a job of another coordinator (or of this one after its state was reset) may
// have the id of a job whose snapshots this worker still keeps, and must not restore them.
//
// Bounded: once no assignment of a job is left on this worker the job's directory is idle;
// Collect removes idle directories older than `keep_idle`, and the oldest beyond
// `max_idle` at once. A restarted gang placed here again within that time finds its
// snapshots. Directories under the root of jobs this object never saw (an earlier run of the
// worker) count as idle since the first Collect.
//
// Time is passed in (the Supervisor's clock). Thread-compatible: the Supervisor calls it
// under its lock (file system calls on a local directory only).

#include <cstddef>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace baton::worker {

struct SnapshotDirsOptions {
  // Absolute; empty: no snapshot directories (ranks get no BATON_SNAPSHOT_DIR).
  std::string root;
  absl::Duration keep_idle = absl::Minutes(10);
  size_t max_idle = 4;
};

class SnapshotDirs {
 public:
  explicit SnapshotDirs(SnapshotDirsOptions options) : options_(std::move(options)) {}

  bool enabled() const { return !options_.root.empty(); }

  // A job's directory name: "<job_id>.<creation time in Unix ns>", or job_id when the
  // creation time is unknown (absl::InfinitePast(): an older coordinator).
  static std::string DirName(const std::string& job_id, absl::Time created);
  // <root>/<name>.
  std::string DirOf(const std::string& name) const;

  // A rank of the job named `name` (DirName) is about to start: its directory exists (0700)
  // and is not idle. Returns the directory. INTERNAL when it cannot be made.
  absl::StatusOr<std::string> Use(const std::string& name);
  // The last assignment of the job named `name` on this worker was forgotten at `now`.
  void Idle(const std::string& name, absl::Time now);
  // Removes idle directories as described above. Best effort: failures are logged.
  void Collect(absl::Time now);

  // Jobs with an idle directory (tests, metrics).
  size_t idle_count() const { return idle_since_.size(); }

 private:
  SnapshotDirsOptions options_;
  absl::flat_hash_map<std::string, absl::Time> idle_since_;
  absl::flat_hash_set<std::string> in_use_;
  bool scanned_ = false;
};

}  // namespace baton::worker
