#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"
#include "worker/output/line_splitter.h"
#include "worker/process/process_launcher.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {

struct OutputPumpOptions {
  // Longest relayed stdout/stderr/metrics line; longer ones are cut (logs) or dropped
  // (metrics).
  size_t max_line_bytes = 64 * 1024;
  // What one rank's output may cost: each of its log files keeps at most
  // max_rank_log_bytes (then a marker line says the rest was not kept), and at most
  // max_rank_log_lines_per_second lines of each stream are relayed per second of the clock
  // (the rest of that second's are dropped, and a marker line says how many).
  int64_t max_rank_log_bytes = int64_t{1} << 30;
  int max_rank_log_lines_per_second = 1000;
  // After a rank exited, how long its pipes are still drained (for the last lines) before
  // the exit is published.
  absl::Duration drain_timeout = absl::Seconds(2);
};

// The rank a pipe or an exit belongs to.
struct PumpedRank {
  std::string job_id;
  int64_t generation = 0;
  int32_t rank = 0;
  bool operator==(const PumpedRank& o) const {
    return rank == o.rank && generation == o.generation && job_id == o.job_id;
  }
};

// One spawned rank as the pump takes it over: its process (whose exit it watches) and the
// read ends of its pipes, with the log files its stdout and stderr are appended to.
struct RankPipes {
  PumpedRank rank;
  std::shared_ptr<Process> process;
  UniqueFd stdout_fd;
  UniqueFd stderr_fd;
  UniqueFd metrics_fd;
  UniqueFd stdout_log;  // stdout.log; invalid: not kept.
  UniqueFd stderr_log;  // stderr.log; invalid: not kept.
  // Read end (a dup) of the worker's side of the rank's BATON_REJOIN_FD socket
  // (trainer/contract/rejoin_protocol.h), for its "waiting <generation>" lines; invalid:
  // none.
  UniqueFd rejoin_fd;
};

// What the pump hands on. Called on its thread, with none of its locks held, one at a time.
// They must not block (no network or disk I/O) and must not call Stop().
struct OutputPumpCallbacks {
  // A line of a rank's stdout or stderr (valid UTF-8; generation, rank, stream, time set).
  std::function<void(const std::string& job_id, baton::v1::LogLine line)> on_log_line;
  // A parsed line of its metrics pipe (generation, rank, time set).
  std::function<void(const std::string& job_id, baton::v1::MetricPoint point)> on_metric_point;
  // Its process exited, and its pipes are drained: every line it wrote was handed on
  // before. Once per rank.
  std::function<void(const PumpedRank& rank, const baton::v1::ProcessExit& exit)> on_exit;
  // The rank said on its rejoin socket that it waits for the generation after
  // `generation` (it holds nothing of that one any more). May be empty.
  std::function<void(const PumpedRank& rank, int64_t generation)> on_rejoin_waiting;
};

// The Supervisor's output thread: one thread owns every rank's pipes. It sleeps in poll() on
// the ranks' stdout, stderr and metrics pipes, their exit fds and a wake-up pipe; appends
// stdout and stderr to the rank's log files (bounded); splits them into lines, relays them
// (rate-bounded) and parses the metrics lines; and publishes each exit once the rank's pipes
// are closed or the drain timeout passed, so that its last lines come before it.
//
// Time: the rate windows and the drain timeout are measured by the injected clock; a drain
// deadline is met by one of its timers waking the thread, not by polling (with a FakeClock,
// Advance() past it publishes the exit).
//
// Threading: Add() and Stop() are thread-safe and may be called with the caller's locks
// held (they take only the pump's own mutex, never held across a callback). Everything else
// happens on the pump's thread, which alone touches the pipes, the log files and the line
// state, and calls the callbacks.
class OutputPump {
 public:
  // `clock` must outlive the pump.
  OutputPump(OutputPumpOptions options, Clock* clock, OutputPumpCallbacks callbacks);
  // Stop().
  ~OutputPump();
  OutputPump(const OutputPump&) = delete;
  OutputPump& operator=(const OutputPump&) = delete;

  // Starts the thread. Errors: INTERNAL if the wake-up pipe cannot be created.
  absl::Status Start();

  // Hands a rank's pipes to the thread, which takes them over at once. After Stop() they
  // are kept open, unread, until the pump is destroyed, and the exit is never published.
  void Add(RankPipes pipes);
  // The process of rank `from` takes part as `to` from now on (it rejoined the next
  // generation in the same process): its lines, points and exit are labelled `to`, its
  // stdout and stderr appended to these logs. Applied by the thread before its next poll:
  // what it handed on before is labelled `from`.
  void Rebind(const PumpedRank& from, const PumpedRank& to, UniqueFd stdout_log,
              UniqueFd stderr_log);

  // Ends the thread: what is still open is closed (each stream's unfinished last line and
  // pending marker handed on first); exits not published yet never are. Idempotent.
  void Stop();

  // Log lines not relayed because a rank printed over max_rank_log_lines_per_second.
  int64_t dropped_log_lines() const { return dropped_log_lines_.load(); }
  // Rank log files that reached max_rank_log_bytes.
  int64_t capped_rank_logs() const { return capped_rank_logs_.load(); }

 private:
  // One pipe of a rank, owned by the thread.
  struct Channel {
    enum class Kind { kStdout, kStderr, kMetrics, kRejoin };
    Channel(PumpedRank r, Kind k, UniqueFd f, UniqueFd log, size_t max_line)
        : rank(std::move(r)),
          kind(k),
          fd(std::move(f)),
          log_file(std::move(log)),
          splitter(max_line) {}
    PumpedRank rank;
    Kind kind;
    UniqueFd fd;
    UniqueFd log_file;  // stdout.log / stderr.log; none for metrics.
    LineSplitter splitter;
    int64_t malformed = 0;    // Metrics lines that did not parse.
    int64_t log_bytes = 0;    // Written to log_file (at most max_rank_log_bytes).
    bool log_capped = false;  // The marker was written: nothing more goes to log_file.
    // The rate bound on relayed lines: the current one-second window and its counts.
    absl::Time window_start = absl::InfinitePast();
    int64_t window_lines = 0;
    int64_t window_dropped = 0;
  };
  // A rank's process, owned by the thread until its exit is published.
  struct ExitWatch {
    PumpedRank rank;
    std::shared_ptr<Process> process;
    std::optional<baton::v1::ProcessExit> exit;  // Collected, waiting for the pipes to drain.
    absl::Time drain_deadline = absl::InfiniteFuture();
  };

  void Wake();
  void Loop();
  // One poll() (blocking until an event unless `block` is false): reads output, collects
  // exits (starting their drain deadline) and closes pipes at EOF.
  void PollOnce(bool block);
  // Publishes the collected exits whose pipes are closed or whose drain deadline passed.
  void PublishDrainedExits();
  bool ReadChannel(Channel& ch);  // False at EOF.
  void EmitLine(Channel& ch, LineSplitter::Line line);
  // Relays one log line of the channel's rank.
  void RelayLine(const Channel& ch, std::string text, absl::Time now);
  // Relays the marker of the lines the rate bound dropped in the channel's window, if any.
  void ReportDroppedLines(Channel& ch, absl::Time now);
  void CloseChannel(Channel& ch);

  const OutputPumpOptions options_;
  Clock* const clock_;
  const OutputPumpCallbacks callbacks_;

  absl::Mutex mu_;
  // Added, not taken over yet (after Stop(): never).
  std::vector<RankPipes> incoming_ ABSL_GUARDED_BY(mu_);
  struct RebindRequest {
    PumpedRank from;
    PumpedRank to;
    UniqueFd stdout_log;
    UniqueFd stderr_log;
  };
  std::vector<RebindRequest> rebinds_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;

  // The thread's own.
  std::vector<std::unique_ptr<Channel>> channels_;
  std::vector<ExitWatch> watches_;

  std::atomic<int64_t> dropped_log_lines_{0};
  std::atomic<int64_t> capped_rank_logs_{0};
  UniqueFd wake_read_;  // Written to wake the thread from poll().
  UniqueFd wake_write_;
  absl::Mutex join_mu_;  // Held by a Stop() joining thread_.
  std::thread thread_;
};

}  // namespace baton::worker
