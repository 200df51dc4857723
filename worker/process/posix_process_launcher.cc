#include "worker/process/posix_process_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/logging.h"
#include "worker/process/fs_isolation.h"
#include "worker/process/path_lookup.h"
#include "worker/process/shim.h"
#include "worker/trainer/contract/lease_page.h"

namespace baton::worker {
namespace {

constexpr absl::Duration kShimStartTimeout = absl::Seconds(30);

// ---- Worker side. ----

baton::v1::ProcessExit DecodeWaitStatus(int status) {
  baton::v1::ProcessExit exit;
  if (WIFEXITED(status)) {
    exit.set_exit_code(WEXITSTATUS(status));
  } else {
    exit.set_exit_code(-1);
    exit.set_signal(WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  }
  return exit;
}

// Waits up to `timeout` for `pid` (a child) to exit and reaps it. Returns false if it did not.
bool ReapWithin(pid_t pid, absl::Duration timeout) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (pidfd >= 0) {
    struct pollfd pfd = {pidfd, POLLIN, 0};
    ::poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(timeout)));
    ::close(pidfd);
  }
  int status;
  pid_t r;
  do {
    r = ::waitpid(pid, &status, pidfd >= 0 ? WNOHANG : 0);
  } while (r < 0 && errno == EINTR);
  return r == pid || (r < 0 && errno == ECHILD);
}

// Reaps the shim `pid` within `timeout`, then hands it to the orphan reaper (if any): reaped
// now, or reaped by it once it exits.
bool ReapShimWithin(pid_t pid, absl::Duration timeout, ChildRegistry* children) {
  const bool reaped = ReapWithin(pid, timeout);
  if (children != nullptr) children->Release(pid);
  return reaped;
}

class ShimProcess final : public Process {
 public:
  ShimProcess(pid_t shim_pid, pid_t pid, UniqueFd control, ChildRegistry* children,
              std::string cgroup)
      : shim_pid_(shim_pid),
        pid_(pid),
        children_(children),
        cgroup_(std::move(cgroup)),
        control_(std::move(control)) {}

  // Closing the control socket makes the shim SIGKILL the group (if still running) and exit.
  ~ShimProcess() override {
    absl::MutexLock lock(&mu_);
    control_.Reset();
    if (!shim_reaped_ && !ReapShimWithin(shim_pid_, absl::Seconds(2), children_)) {
      BATON_LOG(WARNING) << "shim " << shim_pid_ << " of pid " << pid_
                         << " did not exit within 2s of losing its control socket";
    }
    RemoveCgroupLocked();
  }

  int pid() const override { return pid_; }
  int exit_fd() const override { return control_.get(); }

  absl::Status SignalGroup(int signo) override {
    if (signo != SIGTERM && signo != SIGKILL && signo != SIGUSR1 && signo != SIGUSR2) {
      return absl::InvalidArgumentError(absl::StrCat("unsupported signal ", signo));
    }
    absl::MutexLock lock(&mu_);
    if (collected_) return absl::OkStatus();
    const Record rec{kSignal, signo};
    if (::send(control_.get(), &rec, sizeof(rec), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(sizeof(rec))) {
      return absl::UnavailableError(
          absl::StrCat("cannot signal pid ", pid_, ": ", ::strerror(errno)));
    }
    return absl::OkStatus();
  }

  std::optional<baton::v1::ProcessExit> TryCollectExit() override {
    absl::MutexLock lock(&mu_);
    if (collected_) return std::nullopt;
    Record rec;
    const ssize_t n = ::recv(control_.get(), &rec, sizeof(rec), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return std::nullopt;
    collected_ = true;
    if (n == static_cast<ssize_t>(sizeof(rec)) && rec.kind == kExit) {
      shim_reaped_ = ReapShimWithin(shim_pid_, absl::Seconds(2), children_);
      baton::v1::ProcessExit exit = DecodeWaitStatus(rec.value);
      // Read before the cgroup goes: the OOM killer's SIGKILL is counted there.
      if (exit.signal() == SIGKILL && !cgroup_.empty() && RankCgroups::OomKills(cgroup_) > 0) {
        exit.set_oom_killed(true);
      }
      RemoveCgroupLocked();
      return exit;
    }
    // The shim died without reporting (someone killed it, e.g. its own rank): its child
    // lost its guardian, so kill the group ourselves (pid is very likely still the group's
    // leader), then everything else the rank started: its cgroup, or without one every
    // child reparented to the worker (the rank's escapees), and report a SIGKILL.
    BATON_LOG(ERROR) << "shim " << shim_pid_ << " of pid " << pid_
                     << " died unexpectedly; killing process group " << pid_
                     << (cgroup_.empty() ? " and the worker's orphans" : " and its cgroup");
    ::kill(-pid_, SIGKILL);
    shim_reaped_ = ReapShimWithin(shim_pid_, absl::Seconds(2), children_);
    if (!cgroup_.empty()) {
      RemoveCgroupLocked();
    } else if (children_ != nullptr) {
      children_->KillOrphans();
    }
    baton::v1::ProcessExit exit;
    exit.set_exit_code(-1);
    exit.set_signal(SIGKILL);
    return exit;
  }

 private:
  // Kills what is left in the rank's cgroup and removes it (once).
  void RemoveCgroupLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (cgroup_.empty() || cgroup_removed_) return;
    cgroup_removed_ = true;
    if (!RankCgroups::KillAndRemove(cgroup_)) {
      BATON_LOG(WARNING) << "cgroup " << cgroup_ << " of pid " << pid_
                         << " still had processes 2s after cgroup.kill; left in place";
    }
  }

  absl::Mutex mu_;
  const pid_t shim_pid_;
  const pid_t pid_;
  ChildRegistry* const children_;  // May be null.
  const std::string cgroup_;       // The rank's cgroup directory; empty without cgroups.
  bool cgroup_removed_ ABSL_GUARDED_BY(mu_) = false;
  UniqueFd control_ ABSL_GUARDED_BY(mu_);  // Open until destruction: exit_fd() stays valid.
  bool collected_ ABSL_GUARDED_BY(mu_) = false;
  bool shim_reaped_ ABSL_GUARDED_BY(mu_) = false;
};

// argv/envp as the NULL-terminated char* arrays execve wants; they point into `strings`.
std::vector<char*> CStringArray(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

// Launch()'s error for the shim's record of a failed spawn.
absl::Status SpawnError(const Record& rec, const LaunchRequest& request,
                        const std::string& exec_path) {
  switch (rec.kind) {
    case kSpawnFailed:
      return absl::ResourceExhaustedError(
          absl::StrCat("cannot start the process (fork): ", ::strerror(rec.value)));
    case kChdirFailed:
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot change directory to ", request.working_dir, ": ", ::strerror(rec.value)));
    case kExecFailed:
      return absl::FailedPreconditionError(
          absl::StrCat("cannot execute ", exec_path, ": ", ::strerror(rec.value)));
    case kConfineFailed:
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot confine the process to its files (landlock): ", ::strerror(rec.value)));
    case kCgroupFailed:
      return absl::FailedPreconditionError(
          absl::StrCat("cannot move the process into its cgroup: ", ::strerror(rec.value)));
    default:
      return absl::InternalError("the process shim failed before spawning the process");
  }
}

// The executable request.argv[0] names: found on the request's PATH (without one,
// /usr/local/bin:/usr/bin:/bin) unless it holds a '/' (path_lookup.h).
absl::StatusOr<std::string> ResolveExecutable(const LaunchRequest& request) {
  bool has_path = false;
  std::string path_env = GetEnv(request.env, "PATH", &has_path);
  if (!has_path) path_env = "/usr/local/bin:/usr/bin:/bin";
  return FindExecutable(request.argv[0], path_env);
}

// `env` with BATON_LEASE_FD=kLeaseFd instead of any the request set: where a fenced child
// finds the lease page.
std::vector<std::string> EnvWithLeaseFd(const std::vector<std::string>& env) {
  std::vector<std::string> out;
  const std::string prefix = absl::StrCat(trainer::kEnvLeaseFd, "=");
  for (const std::string& e : env) {
    if (!absl::StartsWith(e, prefix)) out.push_back(e);
  }
  out.push_back(absl::StrCat(prefix, ProcessLauncher::kLeaseFd));
  return out;
}

// The fds of a launch besides LaunchedProcess's own ends: the child's ends, which the worker
// closes once the shim is forked, and the worker's end of the control socket.
struct ShimFds {
  UniqueFd stdout_w, stderr_w, metrics_w;  // Write ends of launched's pipes.
  UniqueFd control;                        // The worker's end of the control socket.
  UniqueFd shim_control;                   // The shim's end.
  UniqueFd child_stdin;                    // /dev/null, or the child's end of a socket pair.

  // Closes the shim's and the child's ends, so EOF on the pipes means every writer is gone.
  void CloseChildEnds() {
    stdout_w.Reset();
    stderr_w.Reset();
    metrics_w.Reset();
    shim_control.Reset();
    child_stdin.Reset();
  }
};

// Makes launched's stdout, stderr and metrics pipes, the control socket pair and the
// child's stdin (with pipe_stdin a socket pair whose other end is launched.stdin_fd).
// Errors: MakePipe's; INTERNAL (socketpair, opening /dev/null).
absl::Status MakeShimFds(const LaunchRequest& request, LaunchedProcess& launched, ShimFds& fds) {
  absl::Status s = MakePipe(&launched.stdout_fd, &fds.stdout_w, O_NONBLOCK);
  if (s.ok()) s = MakePipe(&launched.stderr_fd, &fds.stderr_w, O_NONBLOCK);
  if (s.ok()) s = MakePipe(&launched.metrics_fd, &fds.metrics_w, O_NONBLOCK);
  if (!s.ok()) return s;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", ::strerror(errno)));
  }
  fds.control.Reset(sv[0]);
  fds.shim_control.Reset(sv[1]);
  if (request.pipe_stdin) {
    int stdin_sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, stdin_sv) != 0) {
      return absl::InternalError(absl::StrCat("socketpair: ", ::strerror(errno)));
    }
    launched.stdin_fd.Reset(stdin_sv[0]);
    fds.child_stdin.Reset(stdin_sv[1]);
  } else {
    fds.child_stdin.Reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!fds.child_stdin.valid()) {
      return absl::InternalError(absl::StrCat("open /dev/null: ", ::strerror(errno)));
    }
  }
  return absl::OkStatus();
}

// A rank's cgroup directory and the paths the shim and the child use; all empty without
// cgroups.
struct CgroupPaths {
  std::string dir;
  std::string procs;  // dir/cgroup.procs: the child joins it before exec.
  std::string kill;   // dir/cgroup.kill: the shim kills it whole.
};

absl::StatusOr<CgroupPaths> NewCgroupPaths(RankCgroups& cgroups) {
  absl::StatusOr<std::string> dir = cgroups.NewRankCgroup();
  if (!dir.ok()) return dir.status();
  CgroupPaths paths;
  paths.dir = *std::move(dir);
  paths.procs = paths.dir + "/cgroup.procs";
  paths.kill = paths.dir + "/cgroup.kill";
  return paths;
}

// Forks the shim, through `children` (may be null) so that its orphan reaper never reaps
// it. The child runs RunShim(args) and never returns. _Fork, not fork: no atfork handlers
// (gRPC's among them) run, and the child only makes async-signal-safe calls. Returns the
// shim's pid, or < 0 with errno set.
pid_t ForkShim(const ShimArgs& args, ChildRegistry* children) {
  const auto fork_shim = [&args]() -> pid_t {
    const pid_t pid = ::_Fork();
    if (pid == 0) RunShim(args);
    return pid;
  };
  return children != nullptr ? children->ForkRegistered(fork_shim) : fork_shim();
}

// The shim's first record on `control_fd` within kShimStartTimeout: kPid once the child
// exec'd, or why the spawn failed; {0, 0} if none came (a timeout, or the shim died).
Record AwaitFirstRecord(int control_fd) {
  Record rec{0, 0};
  struct pollfd pfd = {control_fd, POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(kShimStartTimeout)));
  } while (ready < 0 && errno == EINTR);
  const ssize_t n = ready > 0 ? ::recv(control_fd, &rec, sizeof(rec), MSG_DONTWAIT) : -1;
  return n == static_cast<ssize_t>(sizeof(rec)) ? rec : Record{0, 0};
}

}  // namespace

void PosixProcessLauncher::SetLeaseRemaining(absl::Duration remaining) {
  if (fence_ != nullptr) fence_->SetRemaining(remaining);
}

absl::StatusOr<LaunchedProcess> PosixProcessLauncher::Launch(const LaunchRequest& request) {
  if (request.argv.empty() || request.argv[0].empty()) {
    return absl::InvalidArgumentError("empty argv");
  }
  const absl::StatusOr<std::string> exec_path = ResolveExecutable(request);
  if (!exec_path.ok()) return exec_path.status();

  // Everything the child needs, built before fork.
  const std::vector<char*> argv = CStringArray(request.argv);
  std::vector<std::string> env_strings;
  const std::vector<std::string>* env = &request.env;
  if (fence_ != nullptr) {  // The child finds the lease page at BATON_LEASE_FD.
    env_strings = EnvWithLeaseFd(request.env);
    env = &env_strings;
  }
  const std::vector<char*> envp = CStringArray(*env);

  LaunchedProcess launched;
  ShimFds fds;
  if (absl::Status s = MakeShimFds(request, launched, fds); !s.ok()) return s;
  absl::StatusOr<UniqueFd> ruleset = LauncherRuleset(request.isolation);
  if (!ruleset.ok()) return ruleset.status();
  CgroupPaths cgroup;
  if (cgroups_ != nullptr) {
    absl::StatusOr<CgroupPaths> made = NewCgroupPaths(*cgroups_);
    if (!made.ok()) return made.status();
    cgroup = *std::move(made);
  }

  const ShimArgs args = {
      fds.shim_control.get(),
      fds.child_stdin.get(),
      fds.stdout_w.get(),
      fds.stderr_w.get(),
      fds.metrics_w.get(),
      ruleset->get(),
      fence_ != nullptr ? fence_->fd() : -1,
      fence_ != nullptr ? fence_->page() : nullptr,
      cgroup.dir.empty() ? nullptr : cgroup.procs.c_str(),
      cgroup.dir.empty() ? nullptr : cgroup.kill.c_str(),
      request.idle_priority,
      exec_path->c_str(),
      argv.data(),
      envp.data(),
      request.working_dir.c_str(),
  };
  const pid_t shim = ForkShim(args, children_);
  if (shim < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", ::strerror(errno)));
  }
  fds.CloseChildEnds();

  const Record rec = AwaitFirstRecord(fds.control.get());
  if (rec.kind != kPid) {
    ::kill(shim, SIGKILL);
    ReapShimWithin(shim, absl::Seconds(2), children_);
    if (!cgroup.dir.empty()) RankCgroups::KillAndRemove(cgroup.dir);
    return SpawnError(rec, request, *exec_path);
  }
  launched.process = std::make_shared<ShimProcess>(shim, rec.value, std::move(fds.control),
                                                   children_, std::move(cgroup.dir));
  return launched;
}

}  // namespace baton::worker
