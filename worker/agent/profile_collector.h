#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "baton/v1/worker_service.pb.h"
#include "common/spec/message_limits.h"
#include "common/time/clock.h"
#include "worker/supervisor/supervisor.h"

namespace baton::worker {

struct ProfileCollectorOptions {
  // How often the profile directories of the ranks waited for are looked at.
  absl::Duration poll_interval = absl::Milliseconds(100);
  // A larger trace is answered with an error saying so (it would not fit the stream).
  int64_t max_trace_bytes = kMaxProfileTraceBytes;
  // Ranks waited for at once; a ProfileRanks beyond is answered with errors at once.
  size_t max_watches = 64;
};

// The worker's side of `baton profile` (worker_service.proto, ProfileRanks -> ProfileTrace).
// For each asked rank: removes the outputs a previous request with the same id left, writes
// `<profile dir>/profile-request` ("id=<request_id> steps=<steps> [start_step=<N>]", 0600;
// no symlink below the job's directory is ever followed, nor a FIFO read), sends the rank SIGUSR2
// (Supervisor::SignalProfile), then looks at the directory every poll_interval until
// `trace-<id>-rank<R>.json` (the trace) or an error file
// (`trace-<id>-rank<R>.error`, `trace-unknown-rank<R>.error`: the trainer refused the
// request) appears, the rank stops running, or ProfileRanks.timeout passes. Exactly one
// ProfileTrace per asked rank goes to `send`: the trace, or `error` saying why there is none.
//
// Bounded: at most max_watches ranks are waited for, each until its timeout at most; a
// trace over max_trace_bytes is not read.
//
// Time: the polls and timeouts run on the injected clock's timers, armed only while a rank
// is waited for.
//
// Threading: Start() from any thread (the agent's session thread); the polls run on the
// clock's timer callbacks. `send` is called without mu_ held, from either. Thread-safe.
class ProfileCollector {
 public:
  using Send = std::function<void(baton::v1::WorkerMessage)>;

  // `supervisor` and `clock` must outlive the collector.
  ProfileCollector(ProfileCollectorOptions options, Supervisor* supervisor, Clock* clock,
                   Send send);
  // Cancels the polls; ranks still waited for are not answered.
  ~ProfileCollector();

  // Carries out `request` (see the class comment). Ranks that cannot be asked (unknown,
  // not running, a command job, a bad request, a full table, a write or signal that
  // failed) are answered with an error at once.
  void Start(const baton::v1::ProfileRanks& request);

  // Ranks being waited for.
  size_t watching() const;

 private:
  struct Watch {
    std::string job_id;
    int64_t generation = 0;
    std::string request_id;
    int32_t rank = 0;
    Supervisor::ProfileDirPath dir;
    absl::Time deadline;
  };

  // Writes the request file and signals the rank: OK, or why it could not be asked.
  absl::Status Ask(const Watch& watch, int64_t steps, int64_t start_step);
  // The timer's callback: answers the watches that are done, re-arms while any is left.
  void Poll();
  // The answer to `watch` if it is done now (trace, error file, rank gone, deadline).
  bool Check(const Watch& watch, baton::v1::ProfileTrace* answer);
  static baton::v1::WorkerMessage Answer(const Watch& watch, const std::string& trace,
                                         const std::string& error);

  const ProfileCollectorOptions options_;
  Supervisor* const supervisor_;
  Clock* const clock_;
  const Send send_;

  mutable absl::Mutex mu_;
  std::vector<Watch> watches_ ABSL_GUARDED_BY(mu_);  // size() <= options_.max_watches
  Clock::Timer timer_ ABSL_GUARDED_BY(mu_);          // Armed while watches_ is not empty.
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace baton::worker
