#include "worker/process_test_util.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/wait.h>

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

}  // namespace baton::worker
