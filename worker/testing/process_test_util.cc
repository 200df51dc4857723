#include "worker/testing/process_test_util.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace baton::worker {

bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  for (;;) {
    if (done()) return true;
    if (absl::Now() >= deadline) return done();
    absl::SleepFor(absl::Milliseconds(10));
  }
}

void BecomeSubreaper() { ::prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); }

bool ProcessGone(pid_t pid) {
  if (pid <= 0) return false;
  int status;
  ::waitpid(pid, &status, WNOHANG);  // ECHILD if it is not our child: fine.
  return ::kill(pid, 0) != 0 && errno == ESRCH;
}

std::string ReadFileOrEmpty(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string MakeTestDir(const std::string& prefix) {
  const char* base = ::getenv("TEST_TMPDIR");
  std::string templ = absl::StrCat(base != nullptr ? base : "/tmp", "/", prefix, "-XXXXXX");
  if (::mkdtemp(templ.data()) == nullptr) return "";
  return templ;
}

ProcessOutcome RunToExit(LaunchedProcess& p, absl::Duration timeout) {
  ProcessOutcome o;
  const absl::Time deadline = absl::Now() + timeout;
  UniqueFd* fds[3] = {&p.stdout_fd, &p.stderr_fd, &p.metrics_fd};
  std::string* sinks[3] = {&o.out, &o.err, &o.metrics};
  while (absl::Now() < deadline) {
    struct pollfd pfd[4];
    for (int i = 0; i < 3; ++i) pfd[i] = {fds[i]->valid() ? fds[i]->get() : -1, POLLIN, 0};
    pfd[3] = {o.exit ? -1 : p.process->exit_fd(), POLLIN, 0};
    if (!fds[0]->valid() && !fds[1]->valid() && !fds[2]->valid() && o.exit) break;
    ::poll(pfd, 4, 100);
    for (int i = 0; i < 3; ++i) {
      if (pfd[i].revents == 0) continue;
      char buf[4096];
      const ssize_t n = ::read(fds[i]->get(), buf, sizeof(buf));
      if (n > 0) sinks[i]->append(buf, static_cast<size_t>(n));
      if (n == 0 || (n < 0 && errno != EAGAIN)) fds[i]->Reset();
    }
    if (pfd[3].revents != 0) o.exit = p.process->TryCollectExit();
  }
  return o;
}

}  // namespace baton::worker
