#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <set>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace baton::worker {

// The children of this process that their owner waits for itself (waitpid(pid)): the
// process shims. Everything else that becomes our child is an orphan reparented to us (we
// are a child subreaper, or PID 1 in a container) and is reaped by ReapOrphans(), which
// never touches a registered pid, so it cannot steal an exit status its owner waits for.
//
// Thread-safe. Code that forks a child it will wait for must fork it through
// ForkRegistered and Release it once reaped (or once it stops waiting for it).
class ChildRegistry {
 public:
  // Calls `fork_fn` (a fork: returns the child's pid, 0 in the child, < 0 on error) with the
  // registry locked, so no reaping runs between the fork and the registration; registers a
  // positive result. Returns what fork_fn returned. In the child, fork_fn must not return
  // (it execs or _exits), as the registry stays locked there.
  pid_t ForkRegistered(const std::function<pid_t()>& fork_fn);

  // The owner reaped `pid` or no longer waits for it (then ReapOrphans reaps it once it
  // exits).
  void Release(pid_t pid);

  // Reaps every exited child of this process that is not registered; returns their pids.
  // Finds them in /proc/*/stat (state Z, parent this process).
  std::vector<pid_t> ReapOrphans();

  // SIGKILLs every live child of this process that is not registered, and reaps it, until
  // none is left (at most 100 rounds; each killed one's children become ours in turn).
  // Such children are the escapees of a rank whose shim died (they were reparented here):
  // the fallback of per-rank cgroups (rank_cgroups.h). Returns how many it killed.
  int KillOrphans();

 private:
  absl::Mutex mu_;
  std::set<pid_t> registered_ ABSL_GUARDED_BY(mu_);
};

// A thread that calls registry->ReapOrphans() at start and whenever SIGCHLD arrives. The
// process must block SIGCHLD in every thread before Start() (so sigwait gets it):
// worker_main blocks it together with the stop signals, before any thread exists.
class OrphanReaper {
 public:
  explicit OrphanReaper(ChildRegistry* registry) : registry_(registry) {}
  ~OrphanReaper();  // Stops the thread.
  OrphanReaper(const OrphanReaper&) = delete;
  OrphanReaper& operator=(const OrphanReaper&) = delete;

  void Start();

 private:
  ChildRegistry* const registry_;
  std::thread thread_;
  std::atomic<bool> stopping_{false};
};

}  // namespace baton::worker
