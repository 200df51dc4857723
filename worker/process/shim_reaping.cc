#include "worker/process/shim_reaping.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

namespace baton::worker::shim {
namespace {

// Parses the decimal number at `p`; returns -1 if there is none. Async-signal-safe.
long ParseLong(const char* p) {
  if (*p < '0' || *p > '9') return -1;
  long v = 0;
  for (; *p >= '0' && *p <= '9'; ++p) v = v * 10 + (*p - '0');
  return v;
}

// The parent pid in /proc/<pid>/stat ("pid (comm) state ppid ..."), or -1. `name` is a
// /proc entry's name. Async-signal-safe (the comm may hold spaces and parentheses: the
// fields after it start at the last ')').
long ParentOf(const char* name) {
  char path[64] = "/proc/";
  size_t len = 6;
  for (const char* c = name; *c != '\0' && len < sizeof(path) - 6; ++c) path[len++] = *c;
  ::memcpy(path + len, "/stat", 6);
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[512];
  const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
  ::close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  const char* close_paren = nullptr;
  for (const char* c = buf; *c != '\0'; ++c) {
    if (*c == ')') close_paren = c;
  }
  // ") S 1234": skip ") ", the state and a space.
  if (close_paren == nullptr || close_paren + 4 >= buf + n) return -1;
  return ParseLong(close_paren + 4);
}

}  // namespace

void KillAllChildren() {
  const pid_t self = ::getpid();
  const int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return;
  alignas(8) char buf[4096];
  for (;;) {
    const long n = ::syscall(SYS_getdents64, dir, buf, sizeof(buf));
    if (n <= 0) break;
    for (long off = 0; off < n;) {
      const auto* d = reinterpret_cast<const struct dirent64*>(buf + off);
      off += d->d_reclen;
      const long pid = ParseLong(d->d_name);
      if (pid > 0 && ParentOf(d->d_name) == self) ::kill(static_cast<pid_t>(pid), SIGKILL);
    }
  }
  ::close(dir);
}

void KillAndReapAllDescendants() {
  for (;;) {
    KillAllChildren();
    int status;
    const pid_t r = ::waitpid(-1, &status, 0);
    if (r < 0 && errno == ECHILD) return;
  }
}

bool ReapOrphansUntil(pid_t child) {
  for (;;) {
    siginfo_t info;
    ::memset(&info, 0, sizeof(info));
    if (::waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) != 0 || info.si_pid == 0) {
      return false;
    }
    if (info.si_pid == child) return true;
    int status;
    ::waitpid(info.si_pid, &status, WNOHANG);
  }
}

}  // namespace baton::worker::shim
