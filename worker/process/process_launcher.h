#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "worker/process/fs_isolation.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {

// One launched training process and its process group. Implementations are thread-safe:
// SignalGroup() is called under the supervisor's lock, TryCollectExit() from the OutputPump's
// thread.
class Process {
 public:
  virtual ~Process() = default;

  // OS pid of the training process; it leads its own process group (pgid == pid).
  virtual int pid() const = 0;

  // Sends SIGTERM, SIGKILL, SIGUSR1 or SIGUSR2 (the built-in trainer's checkpoint and
  // profile requests) to the whole process group. Signalling after the exit was collected is a
  // no-op. Errors: INVALID_ARGUMENT for another signal; UNAVAILABLE if the process can no longer be
  // signalled.
  virtual absl::Status SignalGroup(int signo) = 0;

  // An fd that becomes readable (poll) once TryCollectExit() may have news. Owned by the
  // Process; valid for its lifetime.
  virtual int exit_fd() const = 0;

  // Non-blocking. Returns the exit status once the process exited and every other member of
  // its process group, and every process it left behind outside it, was killed and reaped;
  // nullopt while it runs. Returns the exit once; later calls
  // return nullopt.
  virtual std::optional<baton::v1::ProcessExit> TryCollectExit() = 0;
};

// What to run.
struct LaunchRequest {
  // argv[0] is a path, or a name looked up on the PATH of `env` (execvp semantics).
  std::vector<std::string> argv;
  // The complete environment, "KEY=VALUE".
  std::vector<std::string> env;
  // Working directory; must exist.
  std::string working_dir;
  // If true, the child's stdin is one end of an AF_UNIX SOCK_STREAM socket pair and the other
  // end comes back as LaunchedProcess::stdin_fd (a socket, so writers can use
  // send(MSG_NOSIGNAL) and get EPIPE instead of SIGPIPE when the child is gone; it is
  // bidirectional, so the child may answer on its stdin). Otherwise stdin is /dev/null.
  bool pipe_stdin = false;
  // File system confinement (Landlock): unless empty, the process and its descendants
  // cannot touch the hidden trees but for the exceptions. A launcher that cannot confine
  // the process (no Landlock in the kernel) logs it once and launches it unconfined.
  FsIsolation isolation;
  // The built-in trainer of a TrainerSpec job (set by the worker's supervisor, never from
  // a spec): the only kind of request a warm standby may serve (standby_launcher.h). A
  // command job is always fork/exec'd, whatever its argv[0].
  bool builtin_trainer = false;
  // The child runs under SCHED_IDLE (set before exec, inherited by its threads): it gets a
  // CPU only when no other task wants one, and any task waking up preempts it at once. For
  // a process started ahead of its use (a warm standby). Setting a thread back to
  // SCHED_OTHER takes CAP_SYS_NICE (or an RLIMIT_NICE of 20).
  bool idle_priority = false;
};

// A started process and the read ends of its output pipes (O_NONBLOCK, O_CLOEXEC), which the
// caller owns and drains. The child has stdin on /dev/null (or the socket of
// LaunchRequest::pipe_stdin), stdout and stderr on the first two pipes and the metrics pipe's
// write end at fd kMetricsFd (and, from a fencing launcher, the lease page at kLeaseFd); it
// inherits no other fd.
struct LaunchedProcess {
  std::shared_ptr<Process> process;
  UniqueFd stdout_fd;
  UniqueFd stderr_fd;
  UniqueFd metrics_fd;
  // The worker's end of the child's stdin socket (blocking, O_CLOEXEC) when the request set
  // pipe_stdin; invalid otherwise. Closing it gives the child EOF.
  UniqueFd stdin_fd;
};

// Starts training processes. Implementations are thread-safe.
//
// A program that cannot be run is a Launch error, and nothing of it runs: NOT_FOUND for a
// name not on the PATH; FAILED_PRECONDITION naming the program or the directory and the OS
// error for one that cannot be executed or a working directory that cannot be entered.
// Destroying a Process whose exit was not collected kills its process group.
class ProcessLauncher {
 public:
  // The fd number of the metrics pipe in the child (BATON_METRICS_FD).
  static constexpr int kMetricsFd = 3;
  // The fd number of the lease page in the child of a fencing launcher (BATON_LEASE_FD).
  static constexpr int kLeaseFd = 4;

  virtual ~ProcessLauncher() = default;

  // Errors: INVALID_ARGUMENT for an empty argv; NOT_FOUND/FAILED_PRECONDITION as above;
  // INTERNAL/RESOURCE_EXHAUSTED when pipes or processes cannot be created.
  virtual absl::StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) = 0;

  // The worker's lease now has `remaining` left (InfiniteDuration: no lease that can run
  // out; zero or negative: run out). A launcher whose processes fence themselves (each
  // one's shim kills it once the lease passes unrenewed, even if the worker hangs) records
  // it for its running and future processes; the default does nothing. Thread-safe.
  virtual void SetLeaseRemaining(absl::Duration remaining) {}
};

}  // namespace baton::worker
