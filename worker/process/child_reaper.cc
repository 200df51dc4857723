#include "worker/process/child_reaper.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "common/logging.h"

namespace baton::worker {
namespace {

// The children of `self` (only the zombies if `zombies_only`), from /proc/<pid>/stat
// ("pid (comm) state ppid ...").
std::vector<pid_t> ChildrenOf(pid_t self, bool zombies_only) {
  std::vector<pid_t> zombies;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return zombies;
  while (struct dirent* e = ::readdir(proc)) {
    int pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid) || pid <= 0) continue;
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/%d/stat", pid);
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    char buf[512];
    const ssize_t n = ::read(fd, buf, sizeof(buf) - 1);
    ::close(fd);
    if (n <= 0) continue;
    buf[n] = '\0';
    const char* paren = std::strrchr(buf, ')');
    char state = 0;
    int ppid = 0;
    if (paren != nullptr && std::sscanf(paren + 1, " %c %d", &state, &ppid) == 2 &&
        (state == 'Z' || !zombies_only) && ppid == self) {
      zombies.push_back(pid);
    }
  }
  ::closedir(proc);
  return zombies;
}

}  // namespace

pid_t ChildRegistry::ForkRegistered(const std::function<pid_t()>& fork_fn) {
  absl::MutexLock lock(&mu_);
  const pid_t pid = fork_fn();
  if (pid > 0) registered_.insert(pid);
  return pid;
}

void ChildRegistry::Release(pid_t pid) {
  absl::MutexLock lock(&mu_);
  registered_.erase(pid);
}

std::vector<pid_t> ChildRegistry::ReapOrphans() {
  std::vector<pid_t> reaped;
  absl::MutexLock lock(&mu_);
  for (pid_t pid : ChildrenOf(::getpid(), /*zombies_only=*/true)) {
    if (registered_.count(pid) > 0) continue;
    int status;
    if (::waitpid(pid, &status, WNOHANG) == pid) reaped.push_back(pid);
  }
  return reaped;
}

int ChildRegistry::KillOrphans() {
  int killed = 0;
  // A killed orphan's own children become ours in turn: look again until none is left.
  for (int round = 0; round < 100; ++round) {
    int found = 0;
    {
      absl::MutexLock lock(&mu_);
      for (pid_t pid : ChildrenOf(::getpid(), /*zombies_only=*/false)) {
        if (registered_.count(pid) > 0) continue;
        if (::kill(pid, SIGKILL) == 0) ++found;
      }
    }
    if (found == 0) break;
    killed += found;
    ReapOrphans();
  }
  return killed;
}

OrphanReaper::~OrphanReaper() {
  if (!thread_.joinable()) return;
  stopping_ = true;
  ::pthread_kill(thread_.native_handle(), SIGCHLD);
  thread_.join();
}

void OrphanReaper::Start() {
  thread_ = std::thread([this] {
    sigset_t chld;
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    while (!stopping_) {
      for (pid_t pid : registry_->ReapOrphans()) {
        BATON_LOG(INFO) << "reaped orphan process " << pid;
      }
      int signo = 0;
      if (sigwait(&chld, &signo) != 0) break;
    }
  });
}

}  // namespace baton::worker
