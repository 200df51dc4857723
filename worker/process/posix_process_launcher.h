#pragma once

#include "worker/process/child_reaper.h"
#include "worker/process/process_launcher.h"

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
// * The shim reports the pid only once the child exec'd: a failed chdir or execve comes back
//   from the child on a CLOEXEC pipe, and Launch() returns it as an error.
//
// Thread-safe; Launch() may block for the time the shim needs to fork and the child to exec
// (milliseconds).
//
// `children` (optional, must outlive the launcher and its processes): the shims are forked
// through it, so an OrphanReaper never reaps a shim whose exit a Process waits for.
class PosixProcessLauncher final : public ProcessLauncher {
 public:
  explicit PosixProcessLauncher(ChildRegistry* children = nullptr) : children_(children) {}
  absl::StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) override;

 private:
  ChildRegistry* const children_;
};

}  // namespace baton::worker
