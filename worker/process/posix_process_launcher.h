#pragma once

#include "worker/process/child_reaper.h"
#include "worker/process/lease_fence.h"
#include "worker/process/process_launcher.h"
#include "worker/process/rank_cgroups.h"

namespace baton::worker {

// Launches training processes with fork/exec, each under a small per-rank shim process that
// guarantees no training process outlives the worker.
//
//   baton-worker --fork--> shim ("baton-shim") --fork+exec--> training process (pgid = pid)
//        |                  |
//        +- control socket -+   (AF_UNIX SOCK_SEQPACKET; the worker's end is CLOEXEC)
//
// * The shim is a fork of the worker that never execs; between fork and _exit it runs only
//   async-signal-safe system calls (everything it needs is prepared before the fork). It
//   ignores terminal signals (SIGINT, SIGTERM, SIGHUP, ...) and sits in its own process group.
// * The training process leads its own process group; its descendants (DataLoader workers,
//   `sh -c 'cmd &'`) inherit it unless they call setsid/setpgid themselves.
// * Only the worker holds its end of the control socket (CLOEXEC; other shims close it right
//   after their fork). When the worker dies for any reason, SIGKILL included, the kernel closes
//   it and the shim SIGKILLs the whole process group.
// * Stop signals travel over the socket and the shim delivers them with kill(-pgid). Because
//   the shim is the training process's parent and reaps it only after SIGKILLing what is left
//   of its group, the pgid cannot be reused while it is being signalled.
// * The shim is a child subreaper (PR_SET_CHILD_SUBREAPER): whatever the training process
//   leaves behind (a double fork, a setsid daemon outside its group) is reparented to the
//   shim, which reaps such orphans as they exit.
// * When the training process exits (by itself or stopped) the shim kills the rest of its
//   group, reaps it, then SIGKILLs every remaining child of its own (found in /proc/*/stat)
//   and reaps them until it has none; only then does it send the wait status over the
//   socket, exit, and the worker reaps it. So a reported exit means no descendant is left.
// * Fencing (with a LeaseFence): the shim reads the worker's lease deadline from the fence's
//   page (mapped in the worker before the fork) and SIGKILLs the child's group and every
//   child of its own once the deadline passes, with no word from the worker: a worker
//   daemon that hangs (SIGSTOP, a deadlock, a debugger) renews nothing, so its ranks die by
//   the lease the coordinator gave, before the coordinator counts them as stopped. It
//   looks at the page at least every second. The child gets the page read-only at fd
//   kLeaseFd and BATON_LEASE_FD=4 in its environment (worker/trainer/contract/
//   lease_page.h). The shim is not dumpable, so a rank of the same user cannot ptrace it.
// * The shim reports the pid only once the child exec'd: a failed chdir or execve comes back
//   from the child on a CLOEXEC pipe, and Launch() returns it as an error.
//
// Thread-safe; Launch() may block for the time the shim needs to fork and the child to exec
// (milliseconds).
//
// `children` (optional, must outlive the launcher and its processes): the shims are forked
// through it, so an OrphanReaper never reaps a shim whose exit a Process waits for.
// `fence` (optional, must outlive the launcher and its processes): the lease every shim
// enforces; without it processes are not fenced (SetLeaseRemaining does nothing).
// `cgroups` (optional, must outlive the launcher and its processes): each process gets a
// cgroup of its own (rank_cgroups.h), which its child joins before exec and which is
// killed whole when the process is (by the shim at its exit, a stop or the lease; by the
// worker when the shim died, e.g. killed by its own rank). Without it, a shim that dies
// makes the launcher kill every unregistered child of the worker (`children`'s
// KillOrphans): the rank's escapees, reparented to the worker.
class PosixProcessLauncher final : public ProcessLauncher {
 public:
  explicit PosixProcessLauncher(ChildRegistry* children = nullptr, LeaseFence* fence = nullptr,
                                RankCgroups* cgroups = nullptr)
      : children_(children), fence_(fence), cgroups_(cgroups) {}
  absl::StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) override;
  void SetLeaseRemaining(absl::Duration remaining) override;

 private:
  ChildRegistry* const children_;
  LeaseFence* const fence_;
  RankCgroups* const cgroups_;
};

}  // namespace baton::worker
