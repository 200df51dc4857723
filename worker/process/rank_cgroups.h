#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace baton::worker {

// One cgroup (v2) per rank, so that nothing a rank starts outlives it: a process stays in
// its parent's cgroup whatever it does with sessions, process groups or its shim (double
// forks, setsid daemons, a rank that SIGKILLs its own shim), and one write to the
// cgroup's cgroup.kill (Linux >= 5.14) kills every process in it at once.
//
// Layout: <the worker's own cgroup>/baton-ranks-<worker pid>-<random>/r<n>/. The worker's own cgroup
// directory must be writable (root on a host, a delegated cgroup in a container); ranks
// must not be able to write to it (they could move themselves out), so it is hidden from
// them (the supervisor adds own_dir() to the Landlock hidden set). Without a usable cgroup
// the worker falls back to its shims, which are subreapers, and to killing, when a shim
// dies, every child the worker did not fork itself (ChildRegistry::KillOrphans).
//
// Thread-safe.
class RankCgroups {
 public:
  // Finds this process's cgroup v2 directory (/proc/self/cgroup's "0::" line under the
  // cgroup2 mount of /proc/self/mountinfo) and creates baton-ranks-<pid>-<random> in it,
  // which it holds flock()ed for its life; first removes the directories that workers
  // killed without cleaning up left there (those nobody holds locked).
  // Errors:
  // UNAVAILABLE naming what is missing (no cgroup2 mount, a directory that cannot be
  // written, no cgroup.kill).
  static absl::StatusOr<std::unique_ptr<RankCgroups>> Create();
  // Removes the ranks' directory (empty cgroups only; best effort).
  ~RankCgroups();
  RankCgroups(const RankCgroups&) = delete;
  RankCgroups& operator=(const RankCgroups&) = delete;

  // A new empty cgroup for one rank: its directory. INTERNAL with the OS error if mkdir
  // fails.
  absl::StatusOr<std::string> NewRankCgroup();

  // Kills every process in the cgroup `dir` (cgroup.kill), waits up to `timeout` until it
  // is empty (cgroup.events "populated 0"), then removes it. Returns whether it is gone.
  static bool KillAndRemove(const std::string& dir, absl::Duration timeout = absl::Seconds(2));

  // How many processes of the cgroup `dir` the kernel's OOM killer killed: memory.events'
  // "oom_kill" (cgroup v2 with the memory controller); 0 when the file or the line is
  // missing (no memory controller in the cgroup, as on a hybrid host).
  static int64_t OomKills(const std::string& dir);

  // The worker's own cgroup directory (to hide from ranks) and the ranks' parent.
  const std::string& own_dir() const { return own_dir_; }
  const std::string& ranks_dir() const { return ranks_dir_; }

 private:
  RankCgroups(std::string own_dir, std::string ranks_dir, int lock_fd)
      : own_dir_(std::move(own_dir)), ranks_dir_(std::move(ranks_dir)), lock_fd_(lock_fd) {}

  const std::string own_dir_;
  const std::string ranks_dir_;
  const int lock_fd_;  // ranks_dir_ opened and flock()ed: the mark that it is in use.
  std::atomic<uint64_t> next_{1};
};

}  // namespace baton::worker
