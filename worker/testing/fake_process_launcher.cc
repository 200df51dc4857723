#include "worker/testing/fake_process_launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdlib>

namespace baton::worker {
namespace {

void MakePipeOrDie(UniqueFd* r, UniqueFd* w) {
  if (!MakePipe(r, w, O_NONBLOCK).ok()) std::abort();
}

}  // namespace

FakeProcess::FakeProcess(int pid) : pid_(pid) {
  absl::MutexLock lock(&mu_);
  MakePipeOrDie(&stdout_read_, &stdout_write_);
  MakePipeOrDie(&stderr_read_, &stderr_write_);
  MakePipeOrDie(&metrics_read_, &metrics_write_);
  MakePipeOrDie(&exit_read_, &exit_write_);
}

absl::Status FakeProcess::SignalGroup(int signo) {
  absl::MutexLock lock(&mu_);
  if (!collected_) signals_.push_back(signo);
  return absl::OkStatus();
}

std::optional<baton::v1::ProcessExit> FakeProcess::TryCollectExit() {
  absl::MutexLock lock(&mu_);
  if (collected_ || !exit_.has_value()) return std::nullopt;
  collected_ = true;
  return exit_;
}

std::vector<int> FakeProcess::signals() const {
  absl::MutexLock lock(&mu_);
  return signals_;
}

void FakeProcess::WriteStdout(const std::string& data) {
  absl::MutexLock lock(&mu_);
  (void)WriteAll(stdout_write_.get(), data.data(), data.size());
}

void FakeProcess::WriteStderr(const std::string& data) {
  absl::MutexLock lock(&mu_);
  (void)WriteAll(stderr_write_.get(), data.data(), data.size());
}

void FakeProcess::WriteMetrics(const std::string& data) {
  absl::MutexLock lock(&mu_);
  (void)WriteAll(metrics_write_.get(), data.data(), data.size());
}

void FakeProcess::Exit(const baton::v1::ProcessExit& exit) {
  absl::MutexLock lock(&mu_);
  if (exit_.has_value()) return;
  stdout_write_.Reset();
  stderr_write_.Reset();
  metrics_write_.Reset();
  ExitLocked(exit);
}

void FakeProcess::ExitLeavingPipesOpen(const baton::v1::ProcessExit& exit) {
  absl::MutexLock lock(&mu_);
  if (exit_.has_value()) return;
  ExitLocked(exit);
}

void FakeProcess::ExitLocked(const baton::v1::ProcessExit& exit) {
  exit_ = exit;
  const char byte = 1;
  (void)WriteAll(exit_write_.get(), &byte, 1);
}

absl::StatusOr<LaunchedProcess> FakeProcessLauncher::Launch(const LaunchRequest& request) {
  absl::MutexLock lock(&mu_);
  const size_t nth = requests_.size();
  requests_.push_back(request);
  ++waiting_;
  mu_.Await(absl::Condition(
      +[](bool* blocked) { return !*blocked; }, &blocked_));
  --waiting_;
  if (auto it = failures_.find(nth); it != failures_.end()) return it->second;
  auto process = std::make_shared<FakeProcess>(100000 + static_cast<int>(processes_.size()));
  processes_.push_back(process);
  LaunchedProcess launched;
  launched.process = process;
  launched.stdout_fd = process->TakeStdoutReader();
  launched.stderr_fd = process->TakeStderrReader();
  launched.metrics_fd = process->TakeMetricsReader();
  if (request.pipe_stdin) launched.stdin_fd = process->OpenStdinSocket();
  return launched;
}

UniqueFd FakeProcess::OpenStdinSocket() {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) std::abort();
  stdin_ = UniqueFd(sv[0]);
  return UniqueFd(sv[1]);
}

void FakeProcess::WriteStdin(const std::string& data) {
  if (::send(stdin_.get(), data.data(), data.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(data.size())) {
    std::abort();
  }
}

std::string FakeProcess::ReadStdin(size_t bytes, absl::Duration timeout) {
  std::string out;
  const absl::Time deadline = absl::Now() + timeout;
  while (out.size() < bytes && absl::Now() < deadline) {
    struct pollfd pfd = {stdin_.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 10) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(stdin_.get(), buf, std::min(sizeof(buf), bytes - out.size()), 0);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  return out;
}

bool FakeProcess::StdinAtEof(absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    struct pollfd pfd = {stdin_.get(), POLLIN, 0};
    if (::poll(&pfd, 1, 10) <= 0) continue;
    char byte;
    return ::recv(stdin_.get(), &byte, 1, MSG_DONTWAIT) == 0;
  }
  return false;
}

void FakeProcessLauncher::FailNextLaunch(absl::Status status) {
  absl::MutexLock lock(&mu_);
  failures_[requests_.size()] = std::move(status);
}

void FakeProcessLauncher::FailLaunch(size_t nth, absl::Status status) {
  absl::MutexLock lock(&mu_);
  failures_[nth] = std::move(status);
}

void FakeProcessLauncher::BlockLaunches() {
  absl::MutexLock lock(&mu_);
  blocked_ = true;
}

void FakeProcessLauncher::ReleaseLaunches() {
  absl::MutexLock lock(&mu_);
  blocked_ = false;
}

bool FakeProcessLauncher::AwaitBlockedLaunch(absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  return mu_.AwaitWithTimeout(absl::Condition(
                                  +[](const int* waiting) { return *waiting > 0; }, &waiting_),
                              timeout);
}

std::vector<LaunchRequest> FakeProcessLauncher::requests() const {
  absl::MutexLock lock(&mu_);
  return requests_;
}

std::shared_ptr<FakeProcess> FakeProcessLauncher::process(size_t i) const {
  absl::MutexLock lock(&mu_);
  return i < processes_.size() ? processes_[i] : nullptr;
}

}  // namespace baton::worker
