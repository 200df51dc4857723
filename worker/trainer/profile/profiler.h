#pragma once

// The trainer's side of `baton profile` (issue 14): on request, record a window of
// optimizer steps as spans and write them as this rank's Chrome trace (trace.h).
//
// Protocol with whoever asks (the worker daemon, or a person):
//   1. Optionally write `<dir>/profile-request`, one line of key=value tokens:
//        id=<1-64 of [A-Za-z0-9._-]> steps=<1..10000> [start_step=<N >= 1>]
//      Without the file the window is `default_steps` steps with id "manual".
//   2. Call Request() (async-signal-safe: the trainer's SIGUSR2 handler does).
//   3. At the next step boundary the request is read: the window covers `steps` optimizer
//      steps, starting with step start_step (global numbering, as in metric lines) if that
//      is still ahead, else the next step. A request that cannot be parsed is dropped with
//      its reason in `<dir>/trace-<id>-rank<R>.error` (id "unknown" if none could be read).
//   4. When the window's last step is done, `<dir>/trace-<id>-rank<R>.json` appears
//      (WriteWholeFile: a private temporary file, then renamed, so a reader never sees
//      half a trace and a symlink planted there is replaced, not written through).
//      If training ends first, the steps done so far are written (otherData in the trace
//      says partial).
// A request while a window is open is ignored (the open window finishes).
//
// Threading: Request() from anywhere (a signal handler included); the rest from the
// training thread. recorder() is safe to hand to other threads while a window is open.

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/time/clock.h"
#include "worker/trainer/contract/profile_protocol.h"
#include "worker/trainer/profile/trace.h"

namespace baton::trainer {

struct ProfilerOptions {
  std::string dir;  // Request file and traces; must exist.
  int rank = 0;
  std::string job_id;
  std::string host;
  int64_t default_steps = 20;
  size_t max_spans = 1 << 20;
};

class Profiler {
 public:
  Profiler(ProfilerOptions options, const Clock& clock);

  void Request() { requested_.store(true); }

  // Before optimizer step `step` (1-based, global): the recorder if this step is in a
  // window (arming a pending request first), else null.
  TraceRecorder* BeforeStep(int64_t step);
  // After step `step`: when it was the window's last, writes the trace and returns its
  // path. Errors: writing the file.
  absl::StatusOr<std::optional<std::string>> AfterStep(int64_t step);
  // The end of training: writes an open window's steps so far (partial). Errors: writing.
  absl::StatusOr<std::optional<std::string>> Finish();

  // Records `span` if a window is open (e.g. a checkpoint save).
  void Record(TraceSpan span);
  const Clock& clock() const { return clock_; }

 private:
  absl::StatusOr<std::string> Write(bool partial);
  void Arm(int64_t next_step);

  const ProfilerOptions options_;
  const Clock& clock_;
  std::atomic<bool> requested_{false};
  std::optional<ProfileRequest> pending_;  // Read, waiting for its start_step.
  bool open_ = false;                      // A window is being recorded.
  int64_t first_step_ = 0;                 // Of the open window.
  int64_t last_step_ = 0;
  int64_t steps_done_ = 0;
  std::string id_;
  TraceRecorder recorder_;
};

}  // namespace baton::trainer
