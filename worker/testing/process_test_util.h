#pragma once

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>

#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "worker/process/process_launcher.h"

namespace baton::worker {

// Calls `done` every 10 ms until it returns true or `timeout` passed; returns its last value.
// For waiting on other processes, which cannot notify us.
bool WaitUntil(const std::function<bool()>& done, absl::Duration timeout = absl::Seconds(10));

// Makes this process the subreaper of its descendants (PR_SET_CHILD_SUBREAPER): orphaned
// grandchildren are reparented to it, so ProcessGone() can reap them and see them vanish even
// where PID 1 does not reap.
void BecomeSubreaper();

// True once no process `pid` exists (kill(pid, 0) fails with ESRCH). Reaps `pid` first if it
// is an exited child of this process (a zombie still "exists").
bool ProcessGone(pid_t pid);

// Whole file, or "" if it cannot be read.
std::string ReadFileOrEmpty(const std::string& path);

// A fresh directory under $TEST_TMPDIR (or /tmp).
std::string MakeTestDir(const std::string& prefix);

// What a launched process wrote and how it ended.
struct ProcessOutcome {
  std::string out, err, metrics;
  std::optional<baton::v1::ProcessExit> exit;  // Unset if it did not end in time.
};

// Reads every pipe of `p` to EOF and collects its exit, with a deadline.
ProcessOutcome RunToExit(LaunchedProcess& p, absl::Duration timeout = absl::Seconds(20));

}  // namespace baton::worker
