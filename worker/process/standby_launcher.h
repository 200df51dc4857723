#pragma once

#include <prometheus/collectable.h>
#include <prometheus/metric_family.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/time/clock.h"
#include "worker/process/process_launcher.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {

struct StandbyLauncherOptions {
  // The trainer binary. Only requests whose argv[0] is exactly this path are served by a
  // standby, which is `trainer_path --standby` (worker/trainer/contract/standby_protocol.h).
  std::string trainer_path;
  // Standbys kept ready (typically one per training slot). 0 disables the pool: every
  // request goes to the inner launcher.
  int standbys = 1;
  // The environment the first standbys get, "KEY=VALUE" (e.g. what a rank of a job without
  // spec.env gets). Empty: no standby starts before the first trainer launch. Every trainer
  // launch then replaces it with its own environment (see the class comment).
  std::vector<std::string> env;
  // Working directory of an idle standby (it moves to the request's on handoff).
  std::string working_dir = "/";
  // A replacement starts this long after the last trainer launch (hit or miss), so that its
  // static initialisation (about 1 s of CPU) does not compete with the ranks just started.
  absl::Duration refill_delay = absl::Seconds(5);
  // Standbys start under SCHED_IDLE (LaunchRequest::idle_priority), so that their start-up
  // takes only CPU time the ranks leave idle; a handoff sets every thread back to SCHED_OTHER
  // (a rank runs as a cold one would). Only where this process may do so (CAP_SYS_NICE, or
  // an RLIMIT_NICE of 20): elsewhere standbys start at its own priority.
  bool idle_priority = true;
  // A standby that exits before it is used is replaced after a backoff that doubles per
  // consecutive early exit, from backoff_initial up to backoff_max; a handoff resets it.
  absl::Duration backoff_initial = absl::Seconds(1);
  absl::Duration backoff_max = absl::Minutes(1);
  // How long writing a request may take (by the launcher's clock) before the standby is
  // given up (killed) and the launch falls back to the inner launcher.
  absl::Duration handoff_timeout = absl::Seconds(2);
};

// Counters since construction (for logs and metrics).
struct StandbyStats {
  int ready = 0;            // Standbys started and not yet used or retired,
  int loaded = 0;           // of which this many finished loading (kStandbyLoaded).
  int64_t hits = 0;         // Trainer launches served by a standby.
  int64_t misses = 0;       // Trainer launches that found no matching standby (cold starts).
  int64_t early_exits = 0;  // Standbys that exited (or could not be started) before use.
};

// A ProcessLauncher decorator that keeps warm standby trainers, so that a restarted rank of
// the built-in trainer skips LibTorch's static initialisation (about 1.1 s).
//
// Only requests marked builtin_trainer (a TrainerSpec job's rank) are served by a standby:
// a command job naming the trainer's path is fork/exec'd like any command. A request's
// isolation (Landlock) is applied by the standby to itself at handoff, before it reads the
// request (trainer/contract/standby_protocol.h, "BSR2"), so a rank that started warm is
// confined exactly as a cold one.
//
// A standby is `trainer_path --standby` started through the inner launcher with
// pipe_stdin; it has loaded its libraries and waits on stdin. Launch() of a request whose
// argv[0] is trainer_path takes a matching standby out of the pool (one that said it has
// loaded its libraries if there is one, else the oldest), writes the request to
// it (argv, complete environment, working directory) and returns the standby's
// LaunchedProcess: its pid, process group and pipes are the trainer's from then on, and it
// behaves as if it had been exec'd with the request. Any other request, or a trainer
// request without a matching live standby, goes to the inner launcher unchanged (a cold
// start).
//
// Matching: a standby serves a request only if both environments are equal once the names
// the worker sets per rank (baton::IsReservedEnvName: RANK, MASTER_ADDR, BATON_*, ...) are
// left out, and only if it was started for the same job (BATON_JOB_ID) or for none (the
// worker's job-neutral template): one job's environment is never carried into another's, because
// libraries read the rest (OMP_NUM_THREADS, LD_PRELOAD, ...) during static initialisation, before
// the request arrives. Each trainer launch makes its environment the template for the standbys
// started after it; idle standbys with another one are retired. An elastic restart of a job
// therefore finds standbys with that job's environment.
//
// Pool upkeep happens in ReconcileOnce() (tests call it directly): it notices standbys that
// exited (logged, replaced after a backoff), destroys retired ones and starts replacements
// once refill_delay has passed since the last trainer launch. The thread of Start() calls it
// on events only: a standby exited, a Launch() changed the pool, or the refill or backoff
// time came on the injected clock, which all decisions use.
//
// Thread-safe. One mutex guards the pool; it is never held across a spawn, a handoff or the
// destruction of a process. Destruction stops the thread and kills every unused standby
// (closing its shim's control socket); handed-off processes belong to their callers.
class StandbyLauncher final : public ProcessLauncher {
 public:
  // `inner` and `clock` must outlive this launcher.
  StandbyLauncher(StandbyLauncherOptions options, ProcessLauncher* inner, Clock* clock);
  ~StandbyLauncher() override;

  StandbyLauncher(const StandbyLauncher&) = delete;
  StandbyLauncher& operator=(const StandbyLauncher&) = delete;

  // Starts the maintenance thread (at most once). Without it the pool changes only in
  // ReconcileOnce() and Launch(). Errors: INTERNAL if its wake-up pipe cannot be created.
  absl::Status Start();

  // Errors: those of the inner launcher (a handoff never fails a launch: it falls back).
  absl::StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) override;
  // Passed on to the inner launcher: standbys are its processes, and so are the ranks they
  // become.
  void SetLeaseRemaining(absl::Duration remaining) override {
    inner_->SetLeaseRemaining(remaining);
  }

  // One upkeep pass (see the class comment). Blocks while it starts or kills standbys.
  void ReconcileOnce();

  StandbyStats stats() const;

  // Whether standbys start under SCHED_IDLE: options.idle_priority where it can be undone.
  bool standbys_idle() const { return standbys_idle_; }

 private:
  struct Standby {
    LaunchedProcess launched;
    std::vector<std::string> env_key;  // MatchKey() of the environment it was started with.
    bool loaded = false;               // It sent kStandbyLoaded.
  };

  // The maintenance thread: ReconcileOnce() whenever something happened (see the class
  // comment).
  void MaintenanceLoop();
  // When the pool needs ReconcileOnce() again by the clock: the refill or backoff time if it
  // is short of standbys; InfiniteFuture if not.
  absl::Time NextUpkeepLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Wakes the maintenance thread (a no-op without one).
  void Wake();

  // Reads the kStandbyLoaded byte of standbys still loading (non-blocking).
  void PollLoadedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Takes a standby for a request whose MatchKey() is `key` out of the pool: a loaded one if
  // there is one, else the oldest; null (a counted miss) if the pool is empty. Before that,
  // makes `key` the template (idle standbys that do not serve it are retired) and puts off
  // the refill; then wakes the maintenance thread.
  std::unique_ptr<Standby> TakeStandby(const std::vector<std::string>& key)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The environment entries that must match, sorted: every name but the per-rank ones, and
  // BATON_JOB_ID when set, so that a standby started from one job's environment never
  // serves another job.
  static std::vector<std::string> MatchKey(const std::vector<std::string>& env);

  // Whether a standby started with `standby_key` may serve `request_key`: equal keys, or a
  // job-neutral standby (no BATON_JOB_ID: the worker's template) whose key equals the
  // request's but for BATON_JOB_ID.
  static bool Serves(const std::vector<std::string>& standby_key,
                     const std::vector<std::string>& request_key);

  // Writes the encoded request to the standby's stdin within handoff_timeout, with
  // `ruleset` (a Landlock ruleset fd, or -1) attached to its first byte. Errors:
  // UNAVAILABLE (the standby is gone or does not read).
  absl::Status Handoff(Standby& standby, absl::string_view wire, int ruleset);

  // Takes note of a standby that exited before use: logs it and backs off.
  void OnEarlyExit(const Standby& standby, const baton::v1::ProcessExit& exit);

  // Counts an early exit (or failed start) and returns the backoff it set.
  absl::Duration BackOffLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const StandbyLauncherOptions options_;
  ProcessLauncher* const inner_;
  Clock* const clock_;
  const bool standbys_idle_;

  mutable absl::Mutex mu_;
  // Idle standbys, oldest first.
  std::vector<std::unique_ptr<Standby>> pool_ ABSL_GUARDED_BY(mu_);
  // Standbys to destroy outside the lock (wrong environment).
  std::vector<std::unique_ptr<Standby>> retired_ ABSL_GUARDED_BY(mu_);
  // The environment new standbys get, as MatchKey() (so without per-rank names); unset
  // before the first one is known.
  std::optional<std::vector<std::string>> template_key_ ABSL_GUARDED_BY(mu_);
  // Standbys being spawned by a ReconcileOnce() (counted towards the target).
  int starting_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Time refill_not_before_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  absl::Time backoff_until_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  int consecutive_early_exits_ ABSL_GUARDED_BY(mu_) = 0;
  StandbyStats stats_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;

  UniqueFd wake_read_;  // Written to wake the maintenance thread from its poll().
  UniqueFd wake_write_;
  std::thread thread_;
};

// The launcher's stats as Prometheus families, read at scrape time:
//   baton_worker_standby_trainers{state}              gauge: standbys in the pool, state=
//                                                     "loaded" (libraries loaded) or
//                                                     "loading"
//   baton_worker_trainer_launches_total{start}        counter: start="standby" (a hit) or
//                                                     "cold" (fork+exec: no matching standby)
//   baton_worker_standby_early_exits_total            counter: standbys that died unused
// `launcher` must outlive it. Thread-safe.
class StandbyMetrics final : public prometheus::Collectable {
 public:
  explicit StandbyMetrics(const StandbyLauncher* launcher) : launcher_(launcher) {}
  std::vector<prometheus::MetricFamily> Collect() const override;

 private:
  const StandbyLauncher* const launcher_;
};

}  // namespace baton::worker
