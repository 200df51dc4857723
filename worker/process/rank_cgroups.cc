#include "worker/process/rank_cgroups.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
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

// Removes what workers that died without cleaning up (SIGKILL) left in `own`: every empty
// cgroup under a baton-ranks-* directory, then the directory if it is empty. rmdir only
// removes a cgroup without processes or children, so nothing in use is touched; a live
// worker whose empty directory goes recreates it (NewRankCgroup).
void RemoveStaleRankCgroups(const std::string& own) {
  DIR* d = ::opendir(own.c_str());
  if (d == nullptr) return;
  std::vector<std::string> stale;
  while (struct dirent* e = ::readdir(d)) {
    if (absl::StartsWith(e->d_name, "baton-ranks-")) stale.push_back(own + "/" + e->d_name);
  }
  ::closedir(d);
  for (const std::string& dir : stale) {
    if (DIR* ranks = ::opendir(dir.c_str())) {
      std::vector<std::string> children;
      while (struct dirent* e = ::readdir(ranks)) {
        if (e->d_name[0] == 'r') children.push_back(dir + "/" + e->d_name);
      }
      ::closedir(ranks);
      for (const std::string& child : children) ::rmdir(child.c_str());
    }
    ::rmdir(dir.c_str());
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
  const std::string ranks =
      absl::StrCat(own, "/baton-ranks-", ::getpid(), "-", absl::Hex(random(), absl::kZeroPad8));
  if (::mkdir(ranks.c_str(), 0700) != 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot create the cgroup ", ranks, ": ", ::strerror(errno)));
  }
  if (::access((ranks + "/cgroup.kill").c_str(), W_OK) != 0) {
    ::rmdir(ranks.c_str());
    return absl::UnavailableError(
        absl::StrCat("the kernel has no cgroup.kill (Linux >= 5.14): ", ::strerror(errno)));
  }
  return std::unique_ptr<RankCgroups>(new RankCgroups(own, ranks));
}

RankCgroups::~RankCgroups() { ::rmdir(ranks_dir_.c_str()); }

absl::StatusOr<std::string> RankCgroups::NewRankCgroup() {
  const std::string dir = absl::StrCat(ranks_dir_, "/r", next_.fetch_add(1));
  for (int attempt = 0; attempt < 3; ++attempt) {
    if (::mkdir(dir.c_str(), 0700) == 0) return dir;
    if (errno != ENOENT) break;
    // Another worker starting up removed our directory while it was empty.
    if (::mkdir(ranks_dir_.c_str(), 0700) != 0 && errno != EEXIST) break;
  }
  return absl::InternalError(
      absl::StrCat("cannot create the rank's cgroup ", dir, ": ", ::strerror(errno)));
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
