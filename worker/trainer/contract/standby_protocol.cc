#include "worker/trainer/contract/standby_protocol.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <set>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "worker/trainer/contract/contract.h"
#include "worker/trainer/contract/lease_page.h"

namespace baton::trainer {
namespace {

constexpr char kMagic[4] = {'B', 'S', 'R', '1'};
constexpr char kConfinedMagic[4] = {'B', 'S', 'R', '2'};
constexpr size_t kHeaderBytes = sizeof(kMagic) + sizeof(uint32_t);

absl::Status AppendField(absl::string_view s, std::string* out) {
  if (s.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat("standby request: NUL byte in '", s, "'"));
  }
  out->append(s.data(), s.size());
  out->push_back('\0');
  return absl::OkStatus();
}

// Reads exactly `size` bytes. Returns the number read before EOF (< size) or an error.
absl::StatusOr<size_t> ReadFull(int fd, char* buf, size_t size) {
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::read(fd, buf + done, size - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("standby request: read: ", ::strerror(errno)));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

// Splits the payload into its NUL-terminated fields, in order.
class FieldReader {
 public:
  explicit FieldReader(absl::string_view payload) : rest_(payload) {}

  bool Next(std::string* out) {
    const size_t nul = rest_.find('\0');
    if (nul == absl::string_view::npos) return false;
    out->assign(rest_.data(), nul);
    rest_.remove_prefix(nul + 1);
    return true;
  }
  // A count in the canonical decimal form EncodeStandbyRequest writes: digits only, no
  // sign, space or leading zero (SimpleAtoi alone took "20\r" and "+3", found by
  // standby_request_fuzz).
  bool NextCount(size_t* count) {
    std::string s;
    if (!Next(&s) || s.empty() || (s.size() > 1 && s[0] == '0')) return false;
    for (char c : s) {
      if (c < '0' || c > '9') return false;
    }
    return absl::SimpleAtoi(s, count) && *count <= rest_.size();
  }
  bool done() const { return rest_.empty(); }

 private:
  absl::string_view rest_;
};

// Reads the header from the socket `fd` with recvmsg, so that an fd sent with its first
// byte (SCM_RIGHTS) is received: *passed is that fd (owned by the caller) or -1. Returns
// the number of header bytes read before EOF, or an error.
absl::StatusOr<size_t> ReadHeader(int fd, char* buf, size_t size, int* passed) {
  *passed = -1;
  size_t done = 0;
  while (done < size) {
    struct iovec iov = {buf + done, size - done};
    alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))];
    struct msghdr msg = {};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    const ssize_t n = ::recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0 && errno == ENOTSOCK) {  // Run by hand with stdin on a file: no fds.
      return ReadFull(fd, buf, size);
    }
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(absl::StrCat("standby request: recvmsg: ", ::strerror(errno)));
    }
    for (struct cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS &&
          c->cmsg_len == CMSG_LEN(sizeof(int))) {
        int received;
        std::memcpy(&received, CMSG_DATA(c), sizeof(received));
        if (*passed >= 0) ::close(*passed);
        *passed = received;
      }
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

// The thread ids of this process (entries of /proc/self/task).
std::vector<pid_t> ThreadIds() {
  std::vector<pid_t> tids;
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return tids;
  while (struct dirent* e = ::readdir(d)) {
    int tid;
    if (absl::SimpleAtoi(e->d_name, &tid)) tids.push_back(tid);
  }
  ::closedir(d);
  return tids;
}

// Landlock (and no_new_privs) bind the calling thread and the threads it starts later, not
// threads already running; a standby may have some (OpenBLAS starts its pool when it is
// loaded, unless OMP_NUM_THREADS=1). So every other thread confines itself too, in a handler
// of kConfineSignal sent to it alone (as glibc's setxid broadcast and libpsx do).
const int kConfineSignal = SIGRTMAX - 2;
std::atomic<int> g_ruleset{-1};
std::atomic<int> g_answers{0};
std::atomic<int> g_failures{0};

extern "C" void ConfineThisThread(int) {
  const int saved = errno;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::syscall(SYS_landlock_restrict_self, g_ruleset.load(), 0) != 0) {
    g_failures.fetch_add(1);
  }
  g_answers.fetch_add(1);
  errno = saved;
}

// Has thread `tid` run ConfineThisThread; false if it did not within 2 s (it blocks the
// signal) while still existing.
bool ConfineThread(pid_t tid) {
  const int before = g_answers.load();
  if (::syscall(SYS_tgkill, ::getpid(), tid, kConfineSignal) != 0) return errno == ESRCH;
  for (int waited_ms = 0; waited_ms < 2000; ++waited_ms) {
    if (g_answers.load() != before) return true;
    const struct timespec ms = {0, 1000000};
    ::nanosleep(&ms, nullptr);
  }
  return ::syscall(SYS_tgkill, ::getpid(), tid, 0) != 0;  // Gone meanwhile: fine.
}

// Confines this process, every thread of it, with the Landlock ruleset `ruleset` (closed
// either way), as the cold launcher confines its child between fork and exec.
absl::Status ConfineSelf(int ruleset) {
  const auto failed = [](const std::string& why) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot confine the process to its files (landlock): ", why));
  };
  absl::Status status;
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::syscall(SYS_landlock_restrict_self, ruleset, 0) != 0) {
    status = failed(::strerror(errno));
  }
  g_ruleset.store(ruleset);
  struct sigaction sa = {}, old = {};
  sa.sa_handler = ConfineThisThread;
  sa.sa_flags = SA_RESTART;
  ::sigemptyset(&sa.sa_mask);
  ::sigaction(kConfineSignal, &sa, &old);
  // Until a pass over the threads finds none it has not confined (a thread may start one
  // while it is being confined; that one inherits the confinement if its creator had it).
  std::set<pid_t> done = {static_cast<pid_t>(::syscall(SYS_gettid))};
  for (bool found = true; status.ok() && found;) {
    found = false;
    for (const pid_t tid : ThreadIds()) {
      if (!done.insert(tid).second) continue;
      found = true;
      if (!ConfineThread(tid)) {
        status = failed(absl::StrCat("thread ", tid, " does not take signal ", kConfineSignal));
        break;
      }
    }
  }
  if (status.ok() && g_failures.load() > 0) {
    status = failed(absl::StrCat(g_failures.load(), " thread(s) could not restrict themselves"));
  }
  ::sigaction(kConfineSignal, &old, nullptr);
  ::close(ruleset);
  return status;
}

}  // namespace

absl::StatusOr<std::string> EncodeStandbyRequest(const StandbyRequest& request) {
  if (request.argv.empty()) return absl::InvalidArgumentError("standby request: empty argv");
  std::string payload;
  absl::Status s = AppendField(absl::StrCat(request.argv.size()), &payload);
  for (const std::string& a : request.argv) {
    if (s.ok()) s = AppendField(a, &payload);
  }
  if (s.ok()) s = AppendField(absl::StrCat(request.env.size()), &payload);
  for (const std::string& e : request.env) {
    if (s.ok()) s = AppendField(e, &payload);
  }
  if (s.ok()) s = AppendField(request.working_dir, &payload);
  if (!s.ok()) return s;
  if (payload.size() > kMaxStandbyRequestBytes) {
    return absl::InvalidArgumentError(absl::StrCat("standby request: ", payload.size(),
                                                   " bytes is over the limit of ",
                                                   kMaxStandbyRequestBytes));
  }
  std::string out(request.confined ? kConfinedMagic : kMagic, sizeof(kMagic));
  const uint32_t size = static_cast<uint32_t>(payload.size());
  out.append(reinterpret_cast<const char*>(&size), sizeof(size));
  out += payload;
  return out;
}

absl::StatusOr<std::optional<StandbyRequest>> ReadStandbyRequest(int fd) {
  char header[kHeaderBytes];
  int ruleset = -1;
  absl::StatusOr<size_t> n = ReadHeader(fd, header, sizeof(header), &ruleset);
  const bool confined = n.ok() && *n == sizeof(header) &&
                        std::memcmp(header, kConfinedMagic, sizeof(kConfinedMagic)) == 0;
  if (!confined && ruleset >= 0) ::close(ruleset);  // Not asked for: not used.
  if (!n.ok()) return n.status();
  if (*n == 0) return std::nullopt;
  if (*n < sizeof(header)) return absl::DataLossError("standby request: truncated header");
  if (confined) {
    // Before a byte of the job's request is read.
    if (ruleset < 0) return absl::DataLossError("standby request: confined, but no ruleset");
    RETURN_IF_ERROR(ConfineSelf(ruleset));
  } else if (std::memcmp(header, kMagic, sizeof(kMagic)) != 0) {
    return absl::DataLossError("standby request: bad magic");
  }
  uint32_t size = 0;
  std::memcpy(&size, header + sizeof(kMagic), sizeof(size));
  if (size > kMaxStandbyRequestBytes) {
    return absl::DataLossError(absl::StrCat("standby request: ", size, " bytes is too large"));
  }
  std::string payload(size, '\0');
  n = ReadFull(fd, payload.data(), payload.size());
  if (!n.ok()) return n.status();
  if (*n < payload.size()) return absl::DataLossError("standby request: truncated payload");

  StandbyRequest request;
  request.confined = confined;
  FieldReader fields(payload);
  size_t argc = 0, envc = 0;
  bool ok = fields.NextCount(&argc) && argc > 0;
  request.argv.resize(ok ? argc : 0);
  for (std::string& a : request.argv) ok = ok && fields.Next(&a);
  ok = ok && fields.NextCount(&envc);
  request.env.resize(ok ? envc : 0);
  for (std::string& e : request.env) ok = ok && fields.Next(&e);
  ok = ok && fields.Next(&request.working_dir) && fields.done();
  if (!ok) return absl::DataLossError("standby request: malformed payload");
  return request;
}

bool StdinIsRejoinSocket(const std::vector<std::string>& env) {
  return std::find(env.begin(), env.end(), absl::StrCat(kEnvRejoinFd, "=0")) != env.end();
}

absl::Status ApplyStandbyRequest(const StandbyRequest& request) {
  // The same kind of socket to the worker as a cold launch's pipe_stdin.
  if (!StdinIsRejoinSocket(request.env)) {
    const int dev_null = ::open("/dev/null", O_RDONLY);
    if (dev_null < 0 || ::dup2(dev_null, 0) < 0) {
      return absl::InternalError(absl::StrCat("cannot open /dev/null: ", ::strerror(errno)));
    }
    if (dev_null != 0) ::close(dev_null);
  }
  if (!request.working_dir.empty() && ::chdir(request.working_dir.c_str()) != 0) {
    const int err = errno;
    // The cold launcher's wording (posix_process_launcher.cc), so both read alike.
    const std::string message =
        absl::StrCat("cannot change directory to ", request.working_dir, ": ", ::strerror(err));
    if (err == ENOENT || err == ENOTDIR) return absl::NotFoundError(message);
    if (err == EACCES) return absl::PermissionDeniedError(message);
    return absl::InternalError(message);
  }
  // The lease page's fd is this process's own (from its launch), whatever the request says.
  const char* lease_fd = std::getenv(kEnvLeaseFd);
  const std::string own_lease_fd = lease_fd != nullptr ? lease_fd : "";
  const bool has_lease_fd = lease_fd != nullptr;
  ::clearenv();
  for (const std::string& entry : request.env) {
    // execve would pass an entry without '='; getenv could not see it.
    if (entry.find('=') == std::string::npos) continue;
    ::putenv(::strdup(entry.c_str()));  // Leaked: the environment points into it.
  }
  if (has_lease_fd) {
    ::setenv(kEnvLeaseFd, own_lease_fd.c_str(), 1);
  } else {
    ::unsetenv(kEnvLeaseFd);
  }
  return absl::OkStatus();
}

void SignalStandbyLoaded(int fd) {
  const char byte = kStandbyLoaded;
  while (::send(fd, &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) < 0 && errno == EINTR) {
  }
}

}  // namespace baton::trainer
