#include "worker/trainer/comm/host/process_exit_watch.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <utility>

namespace baton::trainer {
namespace {

#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434  // The same number on every architecture.
#endif

}  // namespace

ProcessExitWatch::ProcessExitWatch(const std::vector<pid_t>& pids,
                                   std::function<void(int index)> on_exit)
    : on_exit_(std::move(on_exit)),
      pidfds_(pids.size(), -1),
      exited_(new std::atomic<bool>[pids.size()]) {
  std::vector<int> gone;
  for (size_t i = 0; i < pids.size(); ++i) {
    exited_[i].store(false);
    if (pids[i] <= 0) continue;
    const int fd = static_cast<int>(::syscall(SYS_pidfd_open, pids[i], 0));
    if (fd >= 0) {
      pidfds_[i] = fd;
    } else if (errno == ESRCH) {
      gone.push_back(static_cast<int>(i));
    }
  }
  stop_fd_ = ::eventfd(0, EFD_CLOEXEC);
  thread_ = std::thread([this, gone = std::move(gone)] {
    for (int i : gone) {
      exited_[i].store(true);
      any_exited_.store(true);
      on_exit_(i);
    }
    Run();
  });
}

ProcessExitWatch::~ProcessExitWatch() {
  if (stop_fd_ >= 0) {
    const uint64_t one = 1;
    while (::write(stop_fd_, &one, sizeof(one)) < 0 && errno == EINTR) {
    }
  }
  thread_.join();  // Without stop_fd_ the thread watched nothing and has ended.
  if (stop_fd_ >= 0) ::close(stop_fd_);
  for (int fd : pidfds_) {
    if (fd >= 0) ::close(fd);
  }
}

bool ProcessExitWatch::Exited(int index) const {
  return index >= 0 && static_cast<size_t>(index) < pidfds_.size() && exited_[index].load();
}

void ProcessExitWatch::Run() {
  std::vector<pollfd> fds;
  std::vector<int> index;  // fds[k] watches index[k]; fds.back() is the stop eventfd.
  for (size_t i = 0; i < pidfds_.size(); ++i) {
    if (pidfds_[i] >= 0 && !exited_[i].load()) {
      fds.push_back({pidfds_[i], POLLIN, 0});
      index.push_back(static_cast<int>(i));
    }
  }
  if (stop_fd_ < 0) return;  // Nothing could end the thread: watch nothing.
  fds.push_back({stop_fd_, POLLIN, 0});
  for (;;) {
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      return;  // Unwatchable now: callers fall back to their polls.
    }
    if (fds.back().revents != 0) return;
    for (size_t k = 0; k + 1 < fds.size();) {
      if (fds[k].revents == 0) {
        ++k;
        continue;
      }
      const int i = index[k];
      exited_[i].store(true);
      any_exited_.store(true);
      on_exit_(i);
      fds.erase(fds.begin() + k);
      index.erase(index.begin() + k);
    }
  }
}

}  // namespace baton::trainer
