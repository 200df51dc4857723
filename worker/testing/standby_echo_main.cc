// standby_echo: a stand-in for baton-trainer in standby_launcher_test. It has the trainer's
// standby mode (`standby_echo --standby`, the same protocol code) and otherwise reports how
// it was started, one "key=value" line each on stdout:
//   mode=standby|cold, pid=, cwd=, stdin= (where fd 0 points), fds= (open fds 0..63),
//   sched= (the main thread's scheduling policy, a number), argv=<each argument>,
//   env=<each entry, in environ order>
// then writes {"step":1} to $BATON_METRICS_FD if set. Arguments: --read=PATH reports
// "read=PATH:ok" or "read=PATH:<error>" for opening PATH (and "thread_read=" the same from
// a thread started before the handoff, if STANDBY_ECHO_THREAD is set, which also reports
// its policy as "thread_sched="); --exit=N exits N
// (default 0);
// --wait blocks until a signal ends it.
// In standby mode, if $STANDBY_ECHO_PID_DIR is set, it creates the file <dir>/<pid> before
// waiting, so the test can find (and kill) idle standbys.

#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <future>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "worker/trainer/contract/standby_protocol.h"

extern char** environ;

namespace {

// "PATH:ok", or "PATH:<error>" when PATH cannot be opened for reading.
std::string OpenResult(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  const std::string result = absl::StrCat(path, ":", fd >= 0 ? "ok" : std::strerror(errno));
  if (fd >= 0) ::close(fd);
  return result;
}

void Print(const std::string& line) {
  const std::string s = line + "\n";
  (void)!::write(1, s.data(), s.size());
}

}  // namespace

int main(int argc, char** argv) {
  bool standby = false;
  std::vector<std::string> args(argv, argv + argc);
  // STANDBY_ECHO_THREAD set: a thread started before the handoff (like a library's pool)
  // opens each --read path too, reported as "thread_read=".
  std::promise<std::vector<std::string>> thread_paths;
  std::promise<std::vector<std::string>> thread_results;
  std::optional<std::thread> helper;
  int helper_sched = 0;  // Read after thread_results is set.
  if (std::getenv("STANDBY_ECHO_THREAD") != nullptr) {
    helper.emplace([paths = thread_paths.get_future(), &thread_results, &helper_sched]() mutable {
      std::vector<std::string> results;
      for (const std::string& path : paths.get()) results.push_back(OpenResult(path));
      helper_sched = ::sched_getscheduler(0);  // This thread's (Linux).
      thread_results.set_value(results);
    });
  }
  if (argc == 2 && absl::string_view(argv[1]) == baton::trainer::kStandbyFlag) {
    standby = true;
    if (const char* dir = std::getenv("STANDBY_ECHO_PID_DIR"); dir != nullptr) {
      const std::string path = absl::StrCat(dir, "/", ::getpid());
      ::close(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
    }
    baton::trainer::SignalStandbyLoaded(0);
    absl::StatusOr<std::optional<baton::trainer::StandbyRequest>> request =
        baton::trainer::ReadStandbyRequest(0);
    if (absl::IsFailedPrecondition(request.status())) {
      std::fprintf(stderr, "baton-worker: %s\n", std::string(request.status().message()).c_str());
      return 127;
    }
    if (!request.ok()) {
      std::fprintf(stderr, "standby_echo: %s\n", request.status().ToString().c_str());
      return 1;
    }
    if (!request->has_value()) return 0;
    if (absl::Status s = baton::trainer::ApplyStandbyRequest(**request); !s.ok()) {
      std::fprintf(stderr, "baton-worker: %s\n", std::string(s.message()).c_str());
      return 127;
    }
    args = (*request)->argv;
  }

  Print(absl::StrCat("mode=", standby ? "standby" : "cold"));
  Print(absl::StrCat("pid=", ::getpid()));
  char cwd[PATH_MAX] = {};
  Print(absl::StrCat("cwd=", ::getcwd(cwd, sizeof(cwd)) != nullptr ? cwd : "?"));
  char target[PATH_MAX] = {};
  const ssize_t n = ::readlink("/proc/self/fd/0", target, sizeof(target) - 1);
  Print(absl::StrCat("stdin=", n > 0 ? std::string(target, static_cast<size_t>(n)) : "?"));
  std::string fds;
  for (int fd = 0; fd < 64; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1) absl::StrAppend(&fds, fds.empty() ? "" : " ", fd);
  }
  Print(absl::StrCat("fds=", fds));
  Print(absl::StrCat("sched=", ::sched_getscheduler(0)));
  for (const std::string& a : args) Print(absl::StrCat("argv=", a));
  for (char** e = environ; *e != nullptr; ++e) Print(absl::StrCat("env=", *e));
  if (const char* fd = std::getenv("BATON_METRICS_FD"); fd != nullptr) {
    int metrics_fd = -1;
    if (absl::SimpleAtoi(fd, &metrics_fd)) (void)!::write(metrics_fd, "{\"step\":1}\n", 11);
  }

  std::vector<std::string> reads;
  for (size_t i = 1; i < args.size(); ++i) {
    absl::string_view path = args[i];
    if (absl::ConsumePrefix(&path, "--read=")) reads.emplace_back(path);
  }
  for (const std::string& path : reads) Print(absl::StrCat("read=", OpenResult(path)));
  if (helper.has_value()) {
    thread_paths.set_value(reads);
    for (const std::string& r : thread_results.get_future().get()) {
      Print(absl::StrCat("thread_read=", r));
    }
    Print(absl::StrCat("thread_sched=", helper_sched));
    helper->join();
  }
  int exit_code = 0;
  for (size_t i = 1; i < args.size(); ++i) {
    absl::string_view a = args[i];
    if (absl::ConsumePrefix(&a, "--exit=")) (void)absl::SimpleAtoi(a, &exit_code);
    if (a == "--wait") {
      for (;;) ::pause();
    }
  }
  return exit_code;
}
