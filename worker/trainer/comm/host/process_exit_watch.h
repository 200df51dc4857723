#pragma once

// Sees other processes exit the moment they do, without polling: the shm collectives'
// waiters sleep on futexes in shared memory, where a SIGKILLed peer leaves no trace, so
// without this they only notice at their next liveness poll (ShmOptions::poll_interval).

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

namespace baton::trainer {

// Watches a fixed set of processes through pidfds (Linux 5.3+): one thread sleeps in
// poll() on them and, as each exits (ends, not reaped: a zombie counts as exited, which
// kill(pid, 0) cannot tell), marks it and calls `on_exit(index)` on that thread, once per
// index. A process whose pidfd cannot be opened (no pidfds, no eventfd) is not watched: the
// caller's own polling must cover it, as it must a lost wake-up; one the open says is
// already gone is marked exited at once (on_exit from the watch thread like any other).
// Exited() and AnyExited() are thread-safe; destruction stops the thread, and no on_exit
// runs after it returns.
class ProcessExitWatch {
 public:
  // `pids[i]` <= 0: nothing watched at index i.
  ProcessExitWatch(const std::vector<pid_t>& pids, std::function<void(int index)> on_exit);
  ~ProcessExitWatch();
  ProcessExitWatch(const ProcessExitWatch&) = delete;
  ProcessExitWatch& operator=(const ProcessExitWatch&) = delete;

  // Whether the process at `index` was seen to exit. False for an index out of range.
  bool Exited(int index) const;
  // Whether any watched process was seen to exit.
  bool AnyExited() const { return any_exited_.load(); }

 private:
  void Run();

  std::function<void(int)> on_exit_;
  std::vector<int> pidfds_;  // -1 where not watched; owned, closed by the destructor.
  std::unique_ptr<std::atomic<bool>[]> exited_;
  std::atomic<bool> any_exited_{false};
  int stop_fd_ = -1;  // An eventfd: written by the destructor to end the thread.
  std::thread thread_;
};

}  // namespace baton::trainer
