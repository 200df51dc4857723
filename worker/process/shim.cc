#include "worker/process/shim.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "worker/process/process_launcher.h"
#include "worker/process/shim_reaping.h"
#include "worker/trainer/contract/lease_page.h"

namespace baton::worker {
namespace {

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
  if (a.idle_priority) {
    const struct sched_param param = {};
    if (::sched_setscheduler(0, SCHED_IDLE, &param) != 0) ChildFailed(kSpawnFailed, errno);
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
}  // namespace

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


}  // namespace baton::worker
