#include "worker/process/posix_process_launcher.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
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
#include "worker/process/shim_reaping.h"
#include "worker/trainer/contract/lease_page.h"

namespace baton::worker {
namespace {

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

// Fd layout inside the shim.
constexpr int kShimControlFd = 3;
constexpr int kShimStdinFd = 4;
constexpr int kShimStdoutFd = 5;
constexpr int kShimStderrFd = 6;
constexpr int kShimMetricsFd = 7;
constexpr int kShimRulesetFd = 8;  // The Landlock ruleset, or a copy of stdin's fd if none.
constexpr int kShimLeaseFd = 9;    // The lease page, or a copy of stdin's fd if none.
constexpr int kShimFirstFreeFd = 10;
// In the child, after its stdio is in place: the write end of the exec status pipe.
constexpr int kChildStatusFd = ProcessLauncher::kLeaseFd + 1;
static_assert(ProcessLauncher::kMetricsFd == 3 && ProcessLauncher::kLeaseFd == 4,
              "the child's fd layout below assumes 3 and 4");
// How long a shim sleeps at most before it reads the lease page again (so a deadline
// moved earlier, or a clock that jumped, is seen within this).
constexpr int kLeaseRecheckMs = 1000;

constexpr int kIgnoredInShim[] = {SIGPIPE, SIGINT,  SIGTERM, SIGHUP,
                                  SIGQUIT, SIGTSTP, SIGTTIN, SIGTTOU};

constexpr absl::Duration kShimStartTimeout = absl::Seconds(30);

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
  const char* exec_path;
  char* const* argv;
  char* const* envp;
  const char* working_dir;
};

// ---- Async-signal-safe helpers (used between fork and exec/_exit). ----

void CloseFrom(int low_fd) {
  if (::close_range(static_cast<unsigned>(low_fd), ~0U, 0) == 0) return;
  struct rlimit rl;
  int max_fd = 65536;
  if (::getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
    max_fd = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, 1 << 20));
  }
  for (int fd = low_fd; fd < max_fd; ++fd) ::close(fd);
}

void SetDisposition(int signo, void (*handler)(int)) {
  struct sigaction sa;
  ::memset(&sa, 0, sizeof(sa));
  sa.sa_handler = handler;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(signo, &sa, nullptr);
}

// Reports a failed step to the shim on the status pipe, then exits.
[[noreturn]] void ChildFailed(RecordKind kind, int err) {
  const Record rec{kind, err};
  (void)!::write(kChildStatusFd, &rec, sizeof(rec));
  ::_exit(127);
}

// The training process, between fork and exec. `status_fd`: the status pipe's write end.
[[noreturn]] void RunChild(const ShimArgs& a, int status_fd) {
  ::setpgid(0, 0);
  for (int signo : kIgnoredInShim) SetDisposition(signo, SIG_DFL);
  sigset_t none;
  ::sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::dup2(kShimStdinFd, 0);
  ::dup2(kShimStdoutFd, 1);
  ::dup2(kShimStderrFd, 2);
  ::dup2(kShimMetricsFd, ProcessLauncher::kMetricsFd);  // Replaces the control socket.
  if (::dup3(status_fd, kChildStatusFd, O_CLOEXEC) < 0) ::_exit(127);
  if (a.lease_fd >= 0) {
    if (::dup2(kShimLeaseFd, ProcessLauncher::kLeaseFd) < 0) ChildFailed(kSpawnFailed, errno);
  } else {
    ::close(ProcessLauncher::kLeaseFd);
  }
  if (a.cgroup_procs != nullptr) {  // Before the confinement, which hides the cgroups.
    const int fd = ::open(a.cgroup_procs, O_WRONLY | O_CLOEXEC);
    if (fd < 0 || ::write(fd, "0", 1) != 1) ChildFailed(kCgroupFailed, errno);
    ::close(fd);
  }
  if (a.ruleset_fd >= 0 && (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
                            ::syscall(SYS_landlock_restrict_self, kShimRulesetFd, 0) != 0)) {
    ChildFailed(kConfineFailed, errno);
  }
  CloseFrom(kChildStatusFd + 1);
  if (a.working_dir[0] != '\0' && ::chdir(a.working_dir) != 0) {
    ChildFailed(kChdirFailed, errno);
  }
  ::execve(a.exec_path, a.argv, a.envp);
  ChildFailed(kExecFailed, errno);
}

// In the shim, once the child was forked: waits until it exec'd (true) or reported a failed
// step, then reaps it and reports that to the worker (false).
bool AwaitExec(pid_t child, int status_read) {
  Record rec{0, 0};
  ssize_t n;
  do {
    n = ::read(status_read, &rec, sizeof(rec));
  } while (n < 0 && errno == EINTR);
  ::close(status_read);
  if (n != static_cast<ssize_t>(sizeof(rec))) return true;  // EOF: the execve closed it.
  int status;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  ::send(kShimControlFd, &rec, sizeof(rec), MSG_NOSIGNAL);
  return false;
}

// Kills every process of the rank's cgroup (if it has one) at once.
void KillCgroup(const char* cgroup_kill) {
  if (cgroup_kill == nullptr) return;
  const int fd = ::open(cgroup_kill, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return;
  (void)!::write(fd, "1", 1);
  ::close(fd);
}

// How long the shim may sleep before it must look at the lease again: -1 (forever) without
// a lease page or once it fenced, else until the deadline, at most kLeaseRecheckMs.
int LeaseWaitMs(const int64_t* page, bool fenced) {
  if (page == nullptr || fenced) return -1;
  const int64_t deadline = __atomic_load_n(page, __ATOMIC_ACQUIRE);
  const int64_t now = trainer::BootTimeNanos();
  if (deadline <= now) return 0;
  const int64_t ms = (deadline - now + 999999) / 1000000;
  return ms < kLeaseRecheckMs ? static_cast<int>(ms) : kLeaseRecheckMs;
}

// The shim once its child exec'd: relays stop signals to the child's group until the child
// exits, then kills and reaps what is left (its group, then every other descendant),
// reports the wait status and exits. Kills the group if the worker goes away, and the
// whole tree (group and orphans) once the lease page's deadline passes, whatever the
// worker does: a hung worker renews nothing.
[[noreturn]] void SuperviseChild(pid_t child, int sigfd, const int64_t* lease_page,
                                 const char* cgroup_kill) {
  bool control_open = true;
  bool fenced = false;
  for (;;) {
    struct pollfd fds[2] = {{sigfd, POLLIN, 0}, {control_open ? kShimControlFd : -1, POLLIN, 0}};
    ::poll(fds, 2, LeaseWaitMs(lease_page, fenced));
    if (!fenced && lease_page != nullptr &&
        __atomic_load_n(lease_page, __ATOMIC_ACQUIRE) <= trainer::BootTimeNanos()) {
      // The lease ran out unrenewed: this generation may already run elsewhere.
      ::kill(-child, SIGKILL);
      KillCgroup(cgroup_kill);
      shim::KillAllChildren();
      fenced = true;
    }
    if (fds[0].revents & POLLIN) {
      struct signalfd_siginfo si;
      while (::read(sigfd, &si, sizeof(si)) > 0) {
      }
    }
    if (shim::ReapOrphansUntil(child)) {
      // The child is a zombie, so its pgid stays reserved: kill what is left of its group,
      // then reap it, kill and reap every other descendant (they are the shim's children
      // by now, or become so as their parents die), and report.
      ::kill(-child, SIGKILL);
      KillCgroup(cgroup_kill);
      int status = 0;
      while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
      }
      shim::KillAndReapAllDescendants();
      const Record rec{kExit, status};
      ::send(kShimControlFd, &rec, sizeof(rec), MSG_NOSIGNAL);
      ::_exit(0);
    }
    if (control_open && fds[1].revents != 0) {
      Record rec;
      const ssize_t n = ::recv(kShimControlFd, &rec, sizeof(rec), MSG_DONTWAIT);
      if (n == static_cast<ssize_t>(sizeof(rec))) {
        if (rec.kind == kSignal && (rec.value == SIGTERM || rec.value == SIGKILL ||
                                    rec.value == SIGUSR1 || rec.value == SIGUSR2)) {
          ::kill(-child, rec.value);
        }
      } else if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
        // The worker is gone: nothing may outlive it.
        ::kill(-child, SIGKILL);
        KillCgroup(cgroup_kill);
        control_open = false;
      }
    }
  }
}

// The shim: a fork of the worker that never execs.
[[noreturn]] void RunShim(const ShimArgs& a) {
  // Move the fds we keep to fixed slots, then close everything else the worker had open
  // (its sockets, other ranks' pipes and control sockets).
  const int keep[] = {a.control_fd, a.stdin_fd,  a.stdout_fd, a.stderr_fd, a.metrics_fd,
                      a.ruleset_fd >= 0 ? a.ruleset_fd : a.stdin_fd,
                      a.lease_fd >= 0 ? a.lease_fd : a.stdin_fd};
  constexpr int kKept = sizeof(keep) / sizeof(keep[0]);
  int high[kKept];
  for (int i = 0; i < kKept; ++i) {
    high[i] = ::fcntl(keep[i], F_DUPFD, kShimFirstFreeFd);
    if (high[i] < 0) ::_exit(1);
  }
  for (int i = 0; i < kKept; ++i) {
    if (::dup2(high[i], kShimControlFd + i) < 0) ::_exit(1);
  }
  CloseFrom(kShimFirstFreeFd);

  ::prctl(PR_SET_NAME, "baton-shim", 0, 0, 0);
  // Ranks run as the same user: keep them from ptrace-ing the shim (to move its lease, or
  // to stop it from killing them).
  ::prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
  // Orphans of the training process (double forks, setsid daemons) become the shim's
  // children, so it can kill and reap them: nothing a rank starts escapes supervision.
  ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0);
  for (int signo = 1; signo < NSIG; ++signo) {
    if (signo != SIGKILL && signo != SIGSTOP) SetDisposition(signo, SIG_DFL);
  }
  for (int signo : kIgnoredInShim) SetDisposition(signo, SIG_IGN);
  sigset_t chld;
  ::sigemptyset(&chld);
  ::sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_SETMASK, &chld, nullptr);
  const int sigfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);
  if (sigfd < 0) {  // The shim learns of the child's exit only through it: no launch.
    const Record rec{kSpawnFailed, errno};
    ::send(kShimControlFd, &rec, sizeof(rec), MSG_NOSIGNAL);
    ::_exit(1);
  }
  ::setpgid(0, 0);

  // A stop signal sent to the child's group right after the fork must not hit the shim's
  // SIG_IGN (an ignored signal is discarded, even if blocked): fork with every signal
  // blocked and the child's dispositions already default, so such a signal stays pending
  // until the child unblocks it. In the shim, SIG_IGN again discards what came meanwhile.
  int status_pipe[2];
  if (::pipe2(status_pipe, O_CLOEXEC) != 0) {
    const Record rec{kSpawnFailed, errno};
    ::send(kShimControlFd, &rec, sizeof(rec), MSG_NOSIGNAL);
    ::_exit(1);
  }
  sigset_t all;
  ::sigfillset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  for (int signo : kIgnoredInShim) SetDisposition(signo, SIG_DFL);
  const pid_t child = ::_Fork();
  if (child != 0) {
    for (int signo : kIgnoredInShim) SetDisposition(signo, SIG_IGN);
    ::sigprocmask(SIG_SETMASK, &chld, nullptr);
  }
  if (child < 0) {
    const Record rec{kSpawnFailed, errno};
    ::send(kShimControlFd, &rec, sizeof(rec), MSG_NOSIGNAL);
    ::_exit(1);
  }
  if (child == 0) RunChild(a, status_pipe[1]);
  // The child has its own copy; a stdin socket must see EOF/EPIPE once the child is gone.
  ::close(kShimStdinFd);
  ::setpgid(child, child);  // Also done by the child; EACCES once it exec'd is fine.
  ::close(status_pipe[1]);
  if (!AwaitExec(child, status_pipe[0])) ::_exit(0);
  {
    const Record rec{kPid, child};
    ::send(kShimControlFd, &rec, sizeof(rec), MSG_NOSIGNAL);
  }

  SuperviseChild(child, sigfd, a.lease_page, a.cgroup_kill);
}

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
      RemoveCgroupLocked();
      return DecodeWaitStatus(rec.value);
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
      return absl::FailedPreconditionError(absl::StrCat(
          "cannot move the process into its cgroup: ", ::strerror(rec.value)));
    default:
      return absl::InternalError("the process shim failed before spawning the process");
  }
}

}  // namespace

void PosixProcessLauncher::SetLeaseRemaining(absl::Duration remaining) {
  if (fence_ != nullptr) fence_->SetRemaining(remaining);
}

absl::StatusOr<LaunchedProcess> PosixProcessLauncher::Launch(const LaunchRequest& request) {
  if (request.argv.empty() || request.argv[0].empty()) {
    return absl::InvalidArgumentError("empty argv");
  }
  bool has_path = false;
  std::string path_env = GetEnv(request.env, "PATH", &has_path);
  if (!has_path) path_env = "/usr/local/bin:/usr/bin:/bin";
  const absl::StatusOr<std::string> exec_path = FindExecutable(request.argv[0], path_env);
  if (!exec_path.ok()) return exec_path.status();

  // Everything the child needs, built before fork.
  const std::vector<char*> argv = CStringArray(request.argv);
  std::vector<std::string> env_strings;
  const std::vector<std::string>* env = &request.env;
  if (fence_ != nullptr) {  // The child finds the lease page at BATON_LEASE_FD.
    const std::string prefix = absl::StrCat(trainer::kEnvLeaseFd, "=");
    for (const std::string& e : request.env) {
      if (!absl::StartsWith(e, prefix)) env_strings.push_back(e);
    }
    env_strings.push_back(absl::StrCat(prefix, kLeaseFd));
    env = &env_strings;
  }
  const std::vector<char*> envp = CStringArray(*env);

  LaunchedProcess launched;
  UniqueFd stdout_w, stderr_w, metrics_w;
  absl::Status s = MakePipe(&launched.stdout_fd, &stdout_w, O_NONBLOCK);
  if (s.ok()) s = MakePipe(&launched.stderr_fd, &stderr_w, O_NONBLOCK);
  if (s.ok()) s = MakePipe(&launched.metrics_fd, &metrics_w, O_NONBLOCK);
  if (!s.ok()) return s;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
    return absl::InternalError(absl::StrCat("socketpair: ", ::strerror(errno)));
  }
  UniqueFd control(sv[0]);
  UniqueFd shim_control(sv[1]);
  UniqueFd child_stdin;  // /dev/null, or the child's end of a socket pair.
  if (request.pipe_stdin) {
    int stdin_sv[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, stdin_sv) != 0) {
      return absl::InternalError(absl::StrCat("socketpair: ", ::strerror(errno)));
    }
    launched.stdin_fd.Reset(stdin_sv[0]);
    child_stdin.Reset(stdin_sv[1]);
  } else {
    child_stdin.Reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    if (!child_stdin.valid()) {
      return absl::InternalError(absl::StrCat("open /dev/null: ", ::strerror(errno)));
    }
  }

  absl::StatusOr<UniqueFd> ruleset = LauncherRuleset(request.isolation);
  if (!ruleset.ok()) return ruleset.status();
  std::string cgroup, cgroup_procs, cgroup_kill;
  if (cgroups_ != nullptr) {
    absl::StatusOr<std::string> dir = cgroups_->NewRankCgroup();
    if (!dir.ok()) return dir.status();
    cgroup = *std::move(dir);
    cgroup_procs = cgroup + "/cgroup.procs";
    cgroup_kill = cgroup + "/cgroup.kill";
  }

  const ShimArgs args = {
      shim_control.get(), child_stdin.get(), stdout_w.get(), stderr_w.get(),
      metrics_w.get(),
      ruleset->get(),
      fence_ != nullptr ? fence_->fd() : -1,
      fence_ != nullptr ? fence_->page() : nullptr,
      cgroup.empty() ? nullptr : cgroup_procs.c_str(),
      cgroup.empty() ? nullptr : cgroup_kill.c_str(),
      exec_path->c_str(),
      argv.data(),
      envp.data(),
      request.working_dir.c_str(),
  };
  // _Fork, not fork: no atfork handlers (gRPC's among them) run, and the child only makes
  // async-signal-safe calls.
  const auto fork_shim = [&args]() -> pid_t {
    const pid_t pid = ::_Fork();
    if (pid == 0) RunShim(args);
    return pid;
  };
  const pid_t shim =
      children_ != nullptr ? children_->ForkRegistered(fork_shim) : fork_shim();
  if (shim < 0) {
    return absl::ResourceExhaustedError(absl::StrCat("fork: ", ::strerror(errno)));
  }

  // Close the child's ends so EOF on the pipes means every writer is gone.
  stdout_w.Reset();
  stderr_w.Reset();
  metrics_w.Reset();
  shim_control.Reset();
  child_stdin.Reset();

  Record rec{0, 0};
  struct pollfd pfd = {control.get(), POLLIN, 0};
  int ready;
  do {
    ready = ::poll(&pfd, 1, static_cast<int>(absl::ToInt64Milliseconds(kShimStartTimeout)));
  } while (ready < 0 && errno == EINTR);
  const ssize_t n = ready > 0 ? ::recv(control.get(), &rec, sizeof(rec), MSG_DONTWAIT) : -1;
  if (n != static_cast<ssize_t>(sizeof(rec)) || rec.kind != kPid) {
    ::kill(shim, SIGKILL);
    ReapShimWithin(shim, absl::Seconds(2), children_);
    if (!cgroup.empty()) RankCgroups::KillAndRemove(cgroup);
    return SpawnError(n == static_cast<ssize_t>(sizeof(rec)) ? rec : Record{0, 0}, request,
                      *exec_path);
  }
  launched.process = std::make_shared<ShimProcess>(shim, rec.value, std::move(control),
                                                   children_, std::move(cgroup));
  return launched;
}

}  // namespace baton::worker
