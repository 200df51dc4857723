#pragma once

// The shim: the process between the worker and each rank, forked from the worker, that
// runs no job code. It confines and execs the rank (the child), relays the worker's stop
// signals to the rank's process group, reports the rank's pid and exit over a control
// socket, kills and reaps what the rank leaves behind, and fences the rank on its own when
// the lease page's deadline passes (a hung worker renews nothing). PosixProcessLauncher
// forks it; between fork and exec only async-signal-safe calls run.

#include <cstdint>

namespace baton::worker {

// One record per SOCK_SEQPACKET message on the control socket.
//   shim -> worker: kPid (the training process's pid, once it exec'd), then kExit (wait
//                   status); or, and then the shim exits, kSpawnFailed (the errno of signalfd,
//                   pipe2 or fork),
//                   kChdirFailed, kConfineFailed (landlock_restrict_self) or kExecFailed
//                   (the child's errno; the child was reaped);
//   worker -> shim: kSignal (SIGTERM, SIGKILL, SIGUSR1 or SIGUSR2 for the process group).
// The child reports a failed chdir or execve to the shim with the same record on a CLOEXEC
// pipe, which an execve that succeeds closes.
enum RecordKind : int32_t {
  kPid = 1,
  kSpawnFailed = 2,
  kExit = 3,
  kSignal = 4,
  kChdirFailed = 5,
  kExecFailed = 6,
  kConfineFailed = 7,
  kCgroupFailed = 8,
};
struct Record {
  int32_t kind;
  int32_t value;
};

// Everything the shim and the child need, prepared before fork: after it only
// async-signal-safe calls run, so nothing may allocate.
struct ShimArgs {
  int control_fd, stdin_fd, stdout_fd, stderr_fd, metrics_fd;  // Worker-side numbers.
  int ruleset_fd;  // A Landlock ruleset to confine the child with, or -1.
  int lease_fd;    // The lease page's fd for the child (at kLeaseFd), or -1.
  // The lease page as mapped in the worker (and so in the shim, its fork), or null: the
  // shim SIGKILLs the child's process tree once its deadline passes (lease_page.h).
  const int64_t* lease_page;
  // The rank's cgroup (rank_cgroups.h): the child joins it before exec, the shim kills it
  // whole with the child's group. Null without cgroups.
  const char* cgroup_procs;
  const char* cgroup_kill;
  bool idle_priority;  // LaunchRequest::idle_priority: the child runs under SCHED_IDLE.
  const char* exec_path;
  char* const* argv;
  char* const* envp;
  const char* working_dir;
};

// The shim's body, in the child of the worker's fork(): never returns. Only
// async-signal-safe calls; `a` was prepared before the fork.
[[noreturn]] void RunShim(const ShimArgs& a);

}  // namespace baton::worker
