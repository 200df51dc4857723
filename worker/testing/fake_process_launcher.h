#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker/process/process_launcher.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {

// A Process that runs nothing: the test writes its output, observes the signals sent to it
// and decides when and how it exits. Thread-safe.
class FakeProcess final : public Process {
 public:
  // Aborts if its pipes cannot be created.
  explicit FakeProcess(int pid);

  int pid() const override { return pid_; }
  absl::Status SignalGroup(int signo) override;
  int exit_fd() const override { return exit_read_.get(); }
  std::optional<baton::v1::ProcessExit> TryCollectExit() override;

  // --- Test side. ---
  std::vector<int> signals() const;
  void WriteStdout(const std::string& data);
  void WriteStderr(const std::string& data);
  void WriteMetrics(const std::string& data);
  // The process ends: its output pipes close and the exit becomes collectable. Only the
  // first call counts.
  void Exit(const baton::v1::ProcessExit& exit);
  // The process ends but its output pipes stay open, as when a process it left behind holds
  // them. Only the first call of either counts.
  void ExitLeavingPipesOpen(const baton::v1::ProcessExit& exit);

  // With a stdin socket (LaunchRequest::pipe_stdin): the process writes to it / reads
  // what the other end wrote so far (waits up to `timeout`, real time, for `bytes` of it);
  // whether the other end was shut down (EOF: what the process would read next).
  void WriteStdin(const std::string& data);
  std::string ReadStdin(size_t bytes, absl::Duration timeout = absl::Seconds(10));
  bool StdinAtEof(absl::Duration timeout = absl::Seconds(10));
  // Makes the socket pair; returns the caller's end.
  UniqueFd OpenStdinSocket();

  // The launcher hands these read ends to the caller of Launch().
  UniqueFd TakeStdoutReader() { return std::move(stdout_read_); }
  UniqueFd TakeStderrReader() { return std::move(stderr_read_); }
  UniqueFd TakeMetricsReader() { return std::move(metrics_read_); }

 private:
  void ExitLocked(const baton::v1::ProcessExit& exit) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int pid_;
  UniqueFd stdout_read_, stderr_read_, metrics_read_;
  mutable absl::Mutex mu_;
  UniqueFd stdout_write_ ABSL_GUARDED_BY(mu_);
  UniqueFd stderr_write_ ABSL_GUARDED_BY(mu_);
  UniqueFd metrics_write_ ABSL_GUARDED_BY(mu_);
  UniqueFd stdin_;  // The process's end of its stdin socket; invalid: none.
  UniqueFd exit_read_;
  UniqueFd exit_write_ ABSL_GUARDED_BY(mu_);
  std::vector<int> signals_ ABSL_GUARDED_BY(mu_);
  std::optional<baton::v1::ProcessExit> exit_ ABSL_GUARDED_BY(mu_);
  bool collected_ ABSL_GUARDED_BY(mu_) = false;
};

// Records launch requests and returns FakeProcesses (pids 100000, 100001, ...). Thread-safe.
class FakeProcessLauncher final : public ProcessLauncher {
 public:
  absl::StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) override;

  // The next Launch() fails with `status`.
  void FailNextLaunch(absl::Status status);
  // Launch() call number `nth` (0-based, counting every call) fails with `status`.
  void FailLaunch(size_t nth, absl::Status status);
  // While blocked, Launch() records its request and then waits until ReleaseLaunches(), as a
  // slow spawn or a standby handoff would.
  void BlockLaunches();
  void ReleaseLaunches();
  // Waits up to `timeout` (real time) until a Launch() waits on the block.
  bool AwaitBlockedLaunch(absl::Duration timeout = absl::Seconds(10)) const;
  std::vector<LaunchRequest> requests() const;
  // The i-th launched process (0-based, in launch order), or nullptr.
  std::shared_ptr<FakeProcess> process(size_t i) const;

 private:
  mutable absl::Mutex mu_;
  std::vector<LaunchRequest> requests_ ABSL_GUARDED_BY(mu_);
  std::vector<std::shared_ptr<FakeProcess>> processes_ ABSL_GUARDED_BY(mu_);
  std::map<size_t, absl::Status> failures_ ABSL_GUARDED_BY(mu_);  // By call number.
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;  // Launch() calls waiting on the block.
};

}  // namespace baton::worker
