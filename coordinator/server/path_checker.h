#pragma once

#include <functional>
#include <memory>

#include "absl/status/status.h"
#include "proto/baton/v1/job.pb.h"

namespace baton::coordinator {

// Runs the blocking part of submit validation (file system checks of a spec's paths,
// CheckJobSpecPaths) on threads of its own, never on the event loop: a hung network mount
// stalls only these threads and the submits waiting on them (whose clients then time
// out), never the control loop.
//
// Bounded: at most `max_pending` checks queued or running; beyond that Check() refuses.
// Thread-safe. Destruction does not wait for a check stuck in the kernel: it stops
// handing out work, and no `done` runs once the destructor returned.
class PathChecker {
 public:
  using CheckFn = std::function<absl::Status(const baton::v1::JobSpec&)>;

  PathChecker(CheckFn check, int threads = 2, int max_pending = 64);
  ~PathChecker();
  PathChecker(const PathChecker&) = delete;
  PathChecker& operator=(const PathChecker&) = delete;

  // Runs check(spec) on a checker thread, then done(its status) on that thread. False
  // (and `done` is dropped) when max_pending checks are already waiting.
  bool Check(baton::v1::JobSpec spec, std::function<void(absl::Status)> done);

 private:
  struct Shared;
  std::shared_ptr<Shared> shared_;
};

}  // namespace baton::coordinator
