#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"
#include "worker/process/process_launcher.h"
#include "worker/process/unique_fd.h"
#include "worker/supervisor/assignment_facts.h"
#include "worker/supervisor/device_table.h"
#include "worker/supervisor/output_pump.h"
#include "worker/supervisor/rank_lifecycle.h"
#include "worker/supervisor/snapshot_dirs.h"

namespace baton::worker {

// Receives what supervised processes produce. Called with no Supervisor lock held:
// OnLogLine/OnMetricPoint from the supervisor's output thread (or, for a rank that could not
// be spawned, the thread launching it), OnReportsPending from the output thread or from a
// thread calling Start/StopAssignment. Implementations must be thread-safe and must not
// block (no network or disk I/O).
class SupervisorListener {
 public:
  virtual ~SupervisorListener() = default;
  virtual void OnLogLine(const std::string& job_id, baton::v1::LogLine line) = 0;
  virtual void OnMetricPoint(const std::string& job_id, baton::v1::MetricPoint point) = 0;
  // A rank's heartbeat line (contract.h), which is not a metric point, read at `read`.
  virtual void OnHeartbeat(const std::string& job_id, baton::v1::RankBeat beat,
                           absl::Time read) = 0;
  // ListFacts() may have something new: an assignment started or failed, a rank exited,
  // or a start was asked for again.
  virtual void OnReportsPending() = 0;
};

struct SupervisorOptions {
  // Absolute; ranks run in <work_dir>/jobs/<job_id>/gen-<g>/rank-<r>/ (created), which holds
  // their stdout.log and stderr.log.
  std::string work_dir;
  // Roots (absolute) a job's paths may lie under besides its own directory
  // <work_dir>/jobs/<job_id> (see job_paths.h). A spec naming another path fails its
  // assignment with "PathNotAllowed".
  std::vector<std::string> allowed_paths;
  // Whether ranks are confined (Landlock, fs_isolation.h) so they cannot touch the work_dir
  // (other jobs' directories, the worker's files) but for their job's directory, nor the
  // secret files.
  bool confine_ranks = true;
  // The worker's credentials (its --tls_key, --tls_cert and --ca files; absolute), hidden
  // from confined ranks wherever they are (PathPolicy::secret_files).
  std::vector<std::string> secret_files;
  // baton-trainer, run for TrainerSpec programs.
  std::string trainer_path = "baton-trainer";
  // The worker's environment ("KEY=VALUE"), the base of every rank's environment.
  std::vector<std::string> base_env;
  // SIGTERM -> SIGKILL grace when a stop request gives none.
  absl::Duration default_stop_grace = absl::Seconds(10);
  // Longest relayed stdout/stderr/metrics line; longer ones are cut (logs) or dropped (metrics).
  size_t max_line_bytes = 64 * 1024;
  // What one rank's output may cost (a tenant's job can print as fast as it likes):
  // each of its stdout.log and stderr.log keeps at most max_rank_log_bytes (then a marker
  // line says the rest was not kept), and at most max_rank_log_lines_per_second lines of
  // each stream are relayed to the coordinator per second of the clock (the rest of that
  // second's are dropped and a marker line says how many).
  int64_t max_rank_log_bytes = int64_t{1} << 30;
  int max_rank_log_lines_per_second = 1000;
  // After a rank exited, how long its pipes are still drained (for the last lines) before the
  // exit is published. Only matters if a process that left the group keeps them open.
  absl::Duration drain_timeout = absl::Seconds(2);
  // The worker's GPUs, one per slot, as CUDA_VISIBLE_DEVICES names them. Each assignment
  // takes one per rank (device_table.h) and its ranks get CUDA_VISIBLE_DEVICES listing them
  // in local-rank order; an assignment finding too few free fails ("DevicesBusy"). Empty:
  // ranks inherit the worker's CUDA_VISIBLE_DEVICES as is (no GPUs, or more slots than GPUs).
  std::vector<std::string> devices;
  // Where each job's ranks keep in-memory snapshots (snapshot_dirs.h): <snapshot_root>/<job>,
  // BATON_SNAPSHOT_DIR in their environment. Absolute; empty: none. Confined ranks may use
  // their own job's only. Best on a memory file system; never below /dev/shm with
  // confine_ranks (Landlock could then not let ranks create shared-memory segments there).
  std::string snapshot_root;
  // Idle snapshot directories (no assignment of their job left here) are removed after this
  // long, and beyond this many at once.
  absl::Duration snapshot_keep_idle = absl::Minutes(10);
  size_t snapshot_max_idle = 4;
  // Healthy ranks kept across a peer's failure (trainer/contract/rejoin_protocol.h): the
  // built-in trainer's ranks get BATON_REJOIN_FD (their stdin, a socket). A stop with
  // keep_waiting parks a rank that waits for the next generation, or says so within this
  // long (meanwhile it is not signalled); a parked process not taken by the job's next
  // assignment here within this long is released (EOF on its socket: it exits; SIGKILL
  // after default_stop_grace). Zero: no rank gets the fd, none is kept.
  absl::Duration rejoin_timeout = absl::Seconds(10);
};

// Runs and supervises the training processes of this worker's assignments (one assignment =
// the ranks of one job generation placed on this worker): spawns them, relays their output
// and metrics, stops them (SIGTERM, SIGKILL after a grace), and keeps each assignment's
// facts (started, failed, exits) until it is told to forget it. Knows nothing of gRPC.
//
// An assignment is accepted (recorded, nothing spawned), then launched (its ranks spawned) or
// failed. It fails when it is failed before its launch (FailAssignment: the agent's checks),
// stopped before its launch (StopAssignment, the lease, Shutdown), or when a rank cannot be
// spawned: then no further rank is spawned and those already spawned are SIGKILLed. A failed
// assignment never reports AssignmentStarted or ProcessExited; it reports one
// AssignmentFailed once none of its processes runs.
//
// Reports: the Supervisor publishes facts (assignment_facts.h), levels read with ListFacts():
// an assignment launched (its ranks' pids; again after each repeated StartAssignment), a
// rank exited, an assignment failed (once none of its processes runs). It keeps no record
// of what the coordinator was told: the agent's ReportLedger does, and calls Forget() once
// everything about an assignment was reported.
//
// Time: every deadline (a stop's grace, the lease, the drain of an exited rank's pipes, the
// bound on Shutdown) is measured by the injected clock and met by one of its timers, not by
// polling: with a FakeClock, Advance() past a grace or the lease has sent the SIGKILLs by the
// time it returns.
//
// Threading: one absl::Mutex guards the assignment table. The OutputPump's thread
// (output_pump.h) owns every pipe: it sleeps in poll() on the ranks' stdout/stderr/metrics
// pipes, their exit fds and a wake-up pipe, appends output to the log files, parses lines,
// calls the listener, and hands each exit back once its rank's pipes are drained; the exit
// is then recorded under the lock. A rank's pipes are handed to it under the lock, as the
// rank becomes RUNNING. Grace and lease deadlines are enforced by the clock's timer callback
// (a RealClock's thread, or the thread advancing a FakeClock), which only sends signals.
// Processes are spawned and log files written without the lock held, by the thread calling
// LaunchAssignment; every other public method returns without waiting for a spawn, so a
// stop is never held up by one. Public methods are thread-safe.
//
// Errors of its own: a rank transition the lifecycle forbids (rank_lifecycle.h) is a bug;
// it is refused, logged and counted (illegal_rank_transitions()).
class Supervisor final : public AssignmentFactSource {
 public:
  // `launcher`, `clock` and `listener` must outlive the Supervisor.
  Supervisor(SupervisorOptions options, ProcessLauncher* launcher, Clock* clock,
             SupervisorListener* listener);
  // Kills whatever still runs (Shutdown with zero grace) if Shutdown was not called.
  ~Supervisor();

  // Starts the output thread. Errors: INTERNAL if its wake-up pipe cannot be created.
  absl::Status Start();

  // Stops every process (SIGTERM, SIGKILL after `grace`; assignments not launched yet fail
  // "WorkerShutdown"), waits until all exited (at most grace + drain_timeout + 5 s by the
  // clock), then stops the output thread. Later AcceptAssignment calls fail with UNAVAILABLE.
  // Idempotent.
  void Shutdown(absl::Duration grace);

  // Records an assignment to run, spawning nothing: its ranks are STARTING until
  // LaunchAssignment or FailAssignment (or a stop) ends that. Returns true for a new
  // assignment, which the caller must launch or fail; false for a known (job_id, generation),
  // which needs nothing more (if it was launched, its start is asked for again:
  // AssignmentFacts::start_requests).
  // Errors: INVALID_ARGUMENT for a malformed request (job id unusable as a directory name,
  // generation < 1, no ranks, duplicate ranks, world_size < 1); UNAVAILABLE after Shutdown.
  absl::StatusOr<bool> AcceptAssignment(const baton::v1::StartAssignment& request);

  // Spawns the accepted assignment's ranks in order, one process per rank (argv from
  // spec.command, or baton-trainer's for spec.trainer; environment from BuildRankEnv). Blocks
  // for the spawns (milliseconds, or a standby handoff). A stop during them is applied as
  // soon as they end. Returns OK once every rank runs; otherwise the assignment failed and
  // the error says why: FAILED_PRECONDITION if it is not waiting for its launch (unknown,
  // launched, failed or stopped meanwhile: nothing is spawned), UNAVAILABLE if the lease ran
  // out ("LeaseExpired"), or the first spawn's error ("LaunchFailed", the reason also written
  // to that rank's stderr.log and relayed as a log line).
  absl::Status LaunchAssignment(const std::string& job_id, int64_t generation);

  // The accepted assignment will not be launched: its ranks end without starting and it
  // reports AssignmentFailed with `reason` and `message`. Errors: FAILED_PRECONDITION if it is
  // not waiting for its launch.
  absl::Status FailAssignment(const std::string& job_id, int64_t generation,
                              const std::string& reason, const std::string& message);

  // AcceptAssignment, then LaunchAssignment if the assignment is new (its errors are only
  // reported, as AssignmentFailed). Errors: those of AcceptAssignment.
  absl::Status StartAssignment(const baton::v1::StartAssignment& request);

  // Sends SIGTERM to the process group of every running rank of `job_id` (`generation` 0:
  // any generation) and SIGKILL once `grace` (default: options.default_stop_grace) expired;
  // a zero or negative grace sends SIGKILL at once. A second stop can only shorten the grace.
  // An assignment not launched yet fails at once ("StopRequested"); one being spawned is
  // stopped as soon as its spawns end. With `keep_waiting` (and a rejoin_timeout), a rank
  // with a rejoin socket that waits for the next generation, or says so within
  // rejoin_timeout, is parked instead: it ends its part with an exit marked
  // kept_for_rejoin, and the job's next assignment on this worker takes its process for the
  // same local rank (LaunchAssignment); a rank that does not say so by then is stopped as
  // above. A later stop without keep_waiting stops it at once.
  // Errors: NOT_FOUND if no such assignment is known.
  absl::Status StopAssignment(const std::string& job_id, int64_t generation,
                              std::optional<absl::Duration> grace, bool keep_waiting = false);

  // The worker's lease (lease.h) runs out at `expiry` (InfiniteFuture: no lease). When the
  // clock reaches it, a timer kills every process of every assignment at once (SIGKILL to
  // each process group, no grace; those being spawned as soon as they are): the Supervisor
  // keeps time on its own, whatever the network or the agent's threads do. A later expiry set
  // after that arms it again. The launcher gets the time left too (SetLeaseRemaining): a
  // fencing launcher's shims kill the ranks by it even when this daemon hangs. Thread-safe.
  void SetLeaseExpiry(absl::Time expiry);
  // How often the lease ran out with processes to kill.
  int64_t lease_expirations() const;
  // Rank transitions refused because the lifecycle forbids them (a bug of the worker).
  int64_t illegal_rank_transitions() const;
  // Log lines not relayed because a rank printed over max_rank_log_lines_per_second.
  int64_t dropped_log_lines() const { return pump_.dropped_log_lines(); }
  // Rank log files (stdout.log, stderr.log) that reached max_rank_log_bytes.
  int64_t capped_rank_logs() const { return pump_.capped_rank_logs(); }

  // Asks a running rank to checkpoint at its next step boundary and exit: SIGUSR1 to its
  // process group (the built-in trainer's contract, and that of a command job with
  // command.elastic, e.g. through client/python/baton; only send it to such ranks). Errors:
  // NOT_FOUND if the rank is unknown; FAILED_PRECONDITION if it is not RUNNING (stopping,
  // exited); UNAVAILABLE if it cannot be signalled.
  absl::Status RequestCheckpoint(const std::string& job_id, int64_t generation, int32_t rank);

  // Where a rank's profile directory is: `below` ("gen-<g>/rank-<r>/profile") under `root`
  // (the job's directory, made by the worker). The rank may replace what is below the root
  // (a symlink to another job's files), so open those components without following one.
  struct ProfileDirPath {
    std::string root;
    std::string below;
    std::string full() const { return root + "/" + below; }
  };
  // `baton profile`: the profile directory of a running rank of the built-in trainer
  // (<rank dir>/profile, passed to it as --profile_dir), where its profile request goes
  // and its trace appears (worker/trainer/profile/profiler.h). Errors: NOT_FOUND if the
  // rank is unknown; FAILED_PRECONDITION if it is not RUNNING, or runs a command ("profiling
  // needs the built-in trainer").
  absl::StatusOr<ProfileDirPath> ProfileDir(const std::string& job_id, int64_t generation,
                                            int32_t rank) const;
  // Asks such a rank to read its profile request at its next step boundary: SIGUSR2 to its
  // process group. Errors: those of ProfileDir; UNAVAILABLE if it cannot be signalled.
  absl::Status SignalProfile(const std::string& job_id, int64_t generation, int32_t rank);

  // For a drain: blocks until no assignment is left (each was forgotten once everything about
  // it was reported), the clock reaches `deadline`, or EndIdleWait() is called. Returns
  // whether no assignment is left.
  bool AwaitIdle(absl::Time deadline);
  // Ends the AwaitIdle() in progress, and makes later ones return at once.
  void EndIdleWait();

  // AssignmentFactSource. Forget releases the assignment's devices.
  std::vector<AssignmentFacts> ListFacts() const override;
  absl::Status Forget(const std::string& job_id, int64_t generation,
                      int64_t start_requests) override;

  // Processes parked for their job's next generation (StopAssignment's keep_waiting).
  size_t parked_count() const;

  // Introspection. nullopt if the rank is unknown (never started, or forgotten).
  std::optional<RankState> GetRankState(const std::string& job_id, int64_t generation,
                                        int32_t rank) const;
  size_t assignment_count() const;

 private:
  struct RankEntry {
    baton::v1::RankInfo info;  // pid once running; exit once EXITED.
    RankLifecycle lifecycle;
    std::shared_ptr<Process> process;                   // Null if it could not be spawned.
    absl::Time kill_deadline = absl::InfiniteFuture();  // STOPPING only.
    // The worker's end of the rank's BATON_REJOIN_FD socket (built-in trainer, while
    // RUNNING); invalid: none.
    UniqueFd rejoin;
    bool waiting = false;  // It said it waits for the next generation.
    // A stop with keep_waiting came before it said so: parked if it does by this time,
    // else stopped with park_grace (RUNNING only).
    absl::Time park_deadline = absl::InfiniteFuture();
    absl::Duration park_grace;
    std::string park_reason;
    // Launching: the parked process (as the pump called it) this rank takes instead of a
    // new one.
    std::optional<PumpedRank> rejoining;
  };
  // A rank's process kept, once its part in its generation ended, for the job's next
  // assignment on this worker (trainer/contract/rejoin_protocol.h).
  struct Parked {
    PumpedRank was;  // What the pump calls it: its job, generation and rank.
    // SnapshotName of its job: only a generation of the same job (same id and creation time,
    // not a job of another coordinator with the same id) takes it.
    std::string job_name;
    int32_t local_rank = 0;
    std::shared_ptr<Process> process;
    UniqueFd rejoin;  // The worker's end of its socket.
    // An assignment being launched takes it (LaunchAssignment): no other may, and it is not
    // released meanwhile.
    bool taken = false;
    // Not taken by then: released (EOF on its socket, so it exits) ...
    absl::Time release_at = absl::InfiniteFuture();
    // ... and SIGKILLed at this, if still there.
    absl::Time kill_at = absl::InfiniteFuture();
  };
  enum class Phase {
    kAccepted,  // Nothing spawned yet.
    kSpawning,  // LaunchAssignment is spawning its ranks (without mu_).
    kLaunched,  // Every rank was spawned, or the assignment failed.
  };
  struct Stop {
    absl::Duration grace;
    std::string reason;
  };
  struct Assignment {
    baton::v1::StartAssignment request;  // As accepted.
    std::string job_id;
    int64_t generation = 0;
    std::vector<RankEntry> ranks;  // One per request rank, in its order; fixed size.
    Phase phase = Phase::kAccepted;
    // Once launched without failing: 1, plus 1 per StartAssignment of it received since.
    int64_t start_requests = 0;
    // A stop during kSpawning (shortest grace, first reason), applied when spawning ends.
    std::optional<Stop> stop_while_spawning;
    // Set once it failed; published (once every rank exited) instead of started and exits.
    std::optional<baton::v1::AssignmentFailed> failure;
    bool launching() const { return phase != Phase::kLaunched; }
    bool all_exited() const {
      for (const RankEntry& r : ranks) {
        if (!r.lifecycle.exited()) return false;
      }
      return true;
    }
  };
  using AssignmentKey = std::pair<std::string, int64_t>;
  struct RankLaunch;

  // The RUNNING rank of a built-in trainer assignment (see ProfileDir's errors).
  absl::StatusOr<const RankEntry*> ProfiledRankLocked(const std::string& job_id, int64_t generation,
                                                      int32_t rank) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // "job J gen G rank R", for logs.
  static std::string Describe(const std::string& job_id, int64_t generation, int32_t rank);
  // The job's snapshot directory name (SnapshotDirs::DirName: its id and creation time).
  static std::string SnapshotName(const baton::v1::StartAssignment& request);

  // `snapshot_dir`: the job's (BATON_SNAPSHOT_DIR), empty for none. `rejoin`: the socket of
  // a parked process to take instead of spawning one (tells it its part in this generation);
  // invalid: spawn. A process that cannot be told is not taken: one is spawned.
  RankLaunch LaunchRank(const baton::v1::StartAssignment& request, const baton::v1::RankInfo& rank,
                        const std::vector<std::string>& devices, const std::string& snapshot_dir,
                        int rejoin = -1);
  // After LaunchAssignment's spawns (`launches`, in rank order, the last one possibly failed):
  // records the processes, or fails the assignment and kills them; applies a stop that came
  // meanwhile. Returns the failed spawn's status, or OK.
  absl::Status FinishLaunchLocked(Assignment& a, std::vector<RankLaunch>& launches)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the reason of a failed spawn to the rank's stderr.log and relays it. Without mu_.
  void ReportSpawnFailure(const std::string& job_id, int64_t generation, int32_t rank,
                          RankLaunch& launch);
  // Fails `a`: its STARTING ranks end without starting; the failure is reported once the
  // ranks that did start (being killed by the caller) exited.
  void FailLocked(Assignment& a, const std::string& reason, const std::string& message)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Stops `a`'s processes (see StopAssignment). Returns true if that failed an assignment
  // not launched yet: the caller tells the listener once mu_ is released.
  bool StopRanksLocked(Assignment& a, absl::Duration grace, absl::string_view reason,
                       bool keep_waiting = false) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // SIGTERM (SIGKILL for a zero grace) to one running or stopping rank.
  void StopRankLocked(Assignment& a, RankEntry& r, absl::Duration grace, absl::string_view reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // For each rank of `a` (being launched) the parked process of the job with its local rank
  // (and its rank, when the job keeps a file per rank outside its directory: a sample log),
  // if any: marked taken, its socket dup'ed into (*rejoin)[i] (empty: none at all).
  void TakeParkedLocked(Assignment& a, std::vector<UniqueFd>& rejoin)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases the parked processes of `job_id` older than `generation` that no rank took:
  // that generation's launch is over.
  void ReleaseParkedLocked(const std::string& job_id, int64_t generation)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `r` takes the parked process it was told its part to (RankLaunch::rejoined): RUNNING
  // with its pid and socket; the pump relabels it. UNAVAILABLE if it exited meanwhile.
  absl::Status AdoptLocked(Assignment& a, RankEntry& r, RankLaunch launch)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends a waiting rank's part (EXITED, kept_for_rejoin) and keeps its process in parked_.
  void ParkLocked(Assignment& a, RankEntry& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // EOF on a parked process's socket, SIGKILL after the default grace.
  void ReleaseLocked(Parked& p, absl::string_view why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The output pump's: a rank said it waits for the next generation.
  void OnRejoinWaiting(const PumpedRank& rank, int64_t generation) ABSL_LOCKS_EXCLUDED(mu_);
  // The rank a process the pump labels `rank` takes part as now: `rank`, or, for one that
  // rejoined a later generation before the pump applied the Rebind, that one.
  PumpedRank TranslateLocked(PumpedRank rank) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The checked transition of one rank: refuses, logs and counts one the lifecycle forbids
  // (FAILED_PRECONDITION naming both states), which leaves the rank unchanged.
  absl::Status TransitionLocked(const Assignment& a, RankEntry& r, RankState to,
                                absl::string_view reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool AllExitedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends SIGKILL to stopping ranks whose grace expired, and to every rank once the lease
  // ran out, then arms the timer for the next deadline. The deadline timer's callback.
  void EnforceDeadlines() ABSL_LOCKS_EXCLUDED(mu_);
  // Returns true if an assignment failed (the caller tells the listener without mu_).
  bool EnforceDeadlinesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Points the deadline timer at NextDeadlineLocked(). Call without mu_ after changing a
  // deadline: a replaced timer is cancelled, which waits for a callback in progress, and the
  // callback takes mu_.
  void ArmDeadlineTimer() ABSL_LOCKS_EXCLUDED(mu_);
  // SIGKILL to every rank of every assignment (those not launched yet fail); returns how
  // many were running, stopping or being spawned. `failed` is set if an assignment failed.
  int KillAllLocked(absl::string_view reason, bool* failed) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Time NextDeadlineLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The output pump's options and callbacks (lines and points to the listener, exits to
  // RecordExit).
  static OutputPumpOptions PumpOptions(const SupervisorOptions& options);
  OutputPumpCallbacks PumpCallbacks();
  // The pump's on_exit: the rank's process exited and its pipes were drained.
  void RecordExit(const PumpedRank& rank, const baton::v1::ProcessExit& exit)
      ABSL_LOCKS_EXCLUDED(mu_);

  const SupervisorOptions options_;
  ProcessLauncher* const launcher_;
  Clock* const clock_;
  SupervisorListener* const listener_;

  mutable absl::Mutex mu_;
  std::map<AssignmentKey, Assignment> assignments_ ABSL_GUARDED_BY(mu_);
  DeviceTable devices_ ABSL_GUARDED_BY(mu_);
  SnapshotDirs snapshot_dirs_ ABSL_GUARDED_BY(mu_);
  std::vector<Parked> parked_ ABSL_GUARDED_BY(mu_);
  // Processes that rejoined: (what the pump called them when parked, their rank now), until
  // they exit.
  std::vector<std::pair<PumpedRank, PumpedRank>> rebound_ ABSL_GUARDED_BY(mu_);
  bool shutting_down_ ABSL_GUARDED_BY(mu_) = false;
  // The output thread runs (Start succeeded, the first Shutdown has not stopped it).
  bool pump_running_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time lease_expiry_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool lease_enforced_ ABSL_GUARDED_BY(mu_) = false;  // for lease_expiry_
  int64_t lease_expirations_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t illegal_rank_transitions_ ABSL_GUARDED_BY(mu_) = 0;
  bool idle_wait_ended_ ABSL_GUARDED_BY(mu_) = false;
  // Calls EnforceDeadlines() at armed_deadline_ (InfiniteFuture: disarmed).
  Clock::Timer deadline_timer_ ABSL_GUARDED_BY(mu_);
  absl::Time armed_deadline_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();

  // Last: stopped (by Shutdown, or its destructor) before what its callbacks use goes.
  OutputPump pump_;
};

}  // namespace baton::worker
