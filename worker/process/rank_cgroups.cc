#include "worker/process/rank_cgroups.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <random>
#include <sstream>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace baton::worker {
namespace {

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Writes `text` to the control file `path`; false (errno set) on failure.
bool WriteControl(const std::string& path, absl::string_view text) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return false;
  const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  const int err = errno;
  ::close(fd);
  errno = err;
  return ok;
}

// The cgroup2 mount point from /proc/self/mountinfo ("... - cgroup2 ..."), or "".
std::string Cgroup2Mount() {
  for (absl::string_view line : absl::StrSplit(ReadText("/proc/self/mountinfo"), '\n')) {
    const std::vector<absl::string_view> halves = absl::StrSplit(line, " - ");
    if (halves.size() != 2 || !absl::StartsWith(halves[1], "cgroup2 ")) continue;
    const std::vector<absl::string_view> fields = absl::StrSplit(halves[0], ' ');
    if (fields.size() >= 5) return std::string(fields[4]);
  }
  return "";
}

// Removes what workers that died without cleaning up (SIGKILL) left in `own`: every
// baton-ranks-* directory that no live worker holds locked (see RankCgroups::Create), with
// its empty rank cgroups. A directory is only touched while this process holds its lock, so
// a live worker's directory, and the empty rank cgroup it just made for a rank about to
// move in, are never removed. rmdir only removes a cgroup without processes or children.
void RemoveStaleRankCgroups(const std::string& own) {
  DIR* d = ::opendir(own.c_str());
  if (d == nullptr) return;
  std::vector<std::string> candidates;
  while (struct dirent* e = ::readdir(d)) {
    if (absl::StartsWith(e->d_name, "baton-ranks-")) candidates.push_back(own + "/" + e->d_name);
  }
  ::closedir(d);
  for (const std::string& dir : candidates) {
    const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {  // Its worker (or a shim of it) is alive.
      ::close(fd);
      continue;
    }
    if (DIR* ranks = ::opendir(dir.c_str())) {
      std::vector<std::string> children;
      while (struct dirent* e = ::readdir(ranks)) {
        if (e->d_name[0] == 'r') children.push_back(dir + "/" + e->d_name);
      }
      ::closedir(ranks);
      for (const std::string& child : children) ::rmdir(child.c_str());
    }
    ::rmdir(dir.c_str());
    ::close(fd);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<RankCgroups>> RankCgroups::Create() {
  const std::string mount = Cgroup2Mount();
  if (mount.empty()) return absl::UnavailableError("no cgroup2 file system is mounted");
  std::string own_path;
  for (absl::string_view line : absl::StrSplit(ReadText("/proc/self/cgroup"), '\n')) {
    if (absl::ConsumePrefix(&line, "0::")) own_path = std::string(line);
  }
  if (own_path.empty()) return absl::UnavailableError("this process is in no cgroup v2 group");
  const std::string own = own_path == "/" ? mount : absl::StrCat(mount, own_path);
  if (::access((own + "/cgroup.procs").c_str(), W_OK) != 0) {
    return absl::UnavailableError(
        absl::StrCat("its cgroup ", own, " is not writable: ", ::strerror(errno)));
  }
  RemoveStaleRankCgroups(own);
  // The pid and a random part: workers in other PID namespaces may share the cgroup.
  std::random_device random;
  for (int attempt = 0; attempt < 3; ++attempt) {
    const std::string ranks =
        absl::StrCat(own, "/baton-ranks-", ::getpid(), "-", absl::Hex(random(), absl::kZeroPad8));
    if (::mkdir(ranks.c_str(), 0700) != 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot create the cgroup ", ranks, ": ", ::strerror(errno)));
    }
    // Held for the worker's life (and its shims', which inherit it across fork): the mark
    // of a directory in use to workers starting next to this one.
    const int lock = ::open(ranks.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (lock < 0 || ::flock(lock, LOCK_EX | LOCK_NB) != 0) {
      if (lock >= 0) ::close(lock);
      continue;  // A worker sweeping stale directories took it first (and removes it).
    }
    // A sweeper may have removed it between mkdir and flock; then try another name.
    const int kill_file = ::openat(lock, "cgroup.kill", O_WRONLY | O_CLOEXEC);
    if (kill_file < 0 && errno == ENOENT && ::access(ranks.c_str(), F_OK) != 0) {
      ::close(lock);
      continue;
    }
    if (kill_file < 0) {
      const int err = errno;
      ::rmdir(ranks.c_str());
      ::close(lock);
      return absl::UnavailableError(
          absl::StrCat("the kernel has no cgroup.kill (Linux >= 5.14): ", ::strerror(err)));
    }
    ::close(kill_file);
    return std::unique_ptr<RankCgroups>(new RankCgroups(own, ranks, lock));
  }
  return absl::UnavailableError(
      absl::StrCat("cannot create a cgroup of its own under ", own,
                   ": workers starting alongside removed it three times"));
}

RankCgroups::~RankCgroups() {
  ::rmdir(ranks_dir_.c_str());
  ::close(lock_fd_);
}

absl::StatusOr<std::string> RankCgroups::NewRankCgroup() {
  const std::string dir = absl::StrCat(ranks_dir_, "/r", next_.fetch_add(1));
  if (::mkdir(dir.c_str(), 0700) != 0) {
    return absl::InternalError(
        absl::StrCat("cannot create the rank's cgroup ", dir, ": ", ::strerror(errno)));
  }
  return dir;
}

int64_t RankCgroups::OomKills(const std::string& dir) {
  std::ifstream in(dir + "/memory.events");
  std::string key;
  int64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return 0;
}

bool RankCgroups::KillAndRemove(const std::string& dir, absl::Duration timeout) {
  WriteControl(dir + "/cgroup.kill", "1");
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (::rmdir(dir.c_str()) == 0 || errno == ENOENT) return true;
    if (errno != EBUSY || absl::Now() >= deadline) return false;
    // cgroup.events signals POLLPRI when "populated" changes; wait for that, briefly.
    const int fd = ::open((dir + "/cgroup.events").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    char buf[256];
    (void)!::read(fd, buf, sizeof(buf));
    struct pollfd pfd = {fd, POLLPRI, 0};
    ::poll(&pfd, 1, 10);
    ::close(fd);
  }
}

}  // namespace baton::worker
