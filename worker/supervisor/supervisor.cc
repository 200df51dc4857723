#include "worker/supervisor/supervisor.h"

#include <signal.h>
#include <sys/socket.h>

#include <algorithm>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/time/proto_time.h"
#include "worker/supervisor/job_paths.h"
#include "worker/trainer/contract/metrics_line.h"

namespace baton::worker {
namespace {

constexpr absl::Duration kShutdownMargin = absl::Seconds(5);

}  // namespace

std::string Supervisor::Describe(const std::string& job_id, int64_t generation, int32_t rank) {
  return absl::StrCat("job ", job_id, " gen ", generation, " rank ", rank);
}

std::string Supervisor::SnapshotName(const baton::v1::StartAssignment& request) {
  return SnapshotDirs::DirName(request.job_id(), request.has_job_create_time()
                                                     ? FromProto(request.job_create_time())
                                                     : absl::InfinitePast());
}

Supervisor::Supervisor(SupervisorOptions options, ProcessLauncher* launcher, Clock* clock,
                       SupervisorListener* listener)
    : options_(std::move(options)),
      launcher_(launcher),
      clock_(clock),
      listener_(listener),
      devices_(options_.devices),
      snapshot_dirs_(SnapshotDirsOptions{options_.snapshot_root, options_.snapshot_keep_idle,
                                         options_.snapshot_max_idle}),
      pump_(PumpOptions(options_), clock, PumpCallbacks()) {}

OutputPumpOptions Supervisor::PumpOptions(const SupervisorOptions& options) {
  OutputPumpOptions pump;
  pump.max_line_bytes = options.max_line_bytes;
  pump.max_rank_log_bytes = options.max_rank_log_bytes;
  pump.max_rank_log_lines_per_second = options.max_rank_log_lines_per_second;
  pump.drain_timeout = options.drain_timeout;
  return pump;
}

OutputPumpCallbacks Supervisor::PumpCallbacks() {
  OutputPumpCallbacks callbacks;
  callbacks.on_log_line = [this](const std::string& job_id, baton::v1::LogLine line) {
    listener_->OnLogLine(job_id, std::move(line));
  };
  callbacks.on_metric_point = [this](const std::string& job_id, baton::v1::MetricPoint point) {
    if (std::optional<baton::v1::RankBeat> beat = HeartbeatFromPoint(point)) {
      listener_->OnHeartbeat(job_id, *std::move(beat), FromProto(point.time()));
      return;
    }
    listener_->OnMetricPoint(job_id, std::move(point));
  };
  callbacks.on_exit = [this](const PumpedRank& rank, const baton::v1::ProcessExit& exit) {
    RecordExit(rank, exit);
  };
  callbacks.on_rejoin_waiting = [this](const PumpedRank& rank, int64_t generation) {
    OnRejoinWaiting(rank, generation);
  };
  return callbacks;
}

Supervisor::~Supervisor() {
  Shutdown(absl::ZeroDuration());
  Clock::Timer deadline_timer;  // Cancelled once mu_ is released: its callback takes mu_.
  absl::MutexLock lock(&mu_);
  deadline_timer = std::move(deadline_timer_);
  // Remaining Process objects die with assignments_; each kills its process group.
}

absl::Status Supervisor::Start() {
  if (absl::Status s = pump_.Start(); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  pump_running_ = true;
  return absl::OkStatus();
}

void Supervisor::Shutdown(absl::Duration grace) {
  bool failed = false;
  {
    absl::MutexLock lock(&mu_);
    if (!shutting_down_) {
      shutting_down_ = true;
      for (auto& [key, a] : assignments_) failed |= StopRanksLocked(a, grace, "WorkerShutdown");
      for (Parked& p : parked_) {
        if (p.kill_at == absl::InfiniteFuture()) ReleaseLocked(p, "the worker shuts down");
        if (grace <= absl::ZeroDuration()) (void)p.process->SignalGroup(SIGKILL);
      }
    }
  }
  if (failed) listener_->OnReportsPending();
  ArmDeadlineTimer();
  {
    absl::MutexLock lock(&mu_);
    if (!pump_running_) return;
    pump_running_ = false;
    clock_->AwaitWithDeadline(&mu_, absl::Condition(this, &Supervisor::AllExitedLocked),
                              clock_->Now() + std::max(grace, absl::ZeroDuration()) +
                                  options_.drain_timeout + kShutdownMargin);
  }
  pump_.Stop();
}

bool Supervisor::AllExitedLocked() const {
  for (const auto& [key, a] : assignments_) {
    if (a.launching() || !a.all_exited()) return false;
  }
  return parked_.empty();
}

absl::Status Supervisor::TransitionLocked(const Assignment& a, RankEntry& r, RankState to,
                                          absl::string_view reason) {
  const RankState from = r.lifecycle.state();
  absl::Status s = r.lifecycle.TransitionTo(to, clock_->Now(), reason);
  if (!s.ok()) {
    ++illegal_rank_transitions_;
    BATON_LOG(ERROR) << Describe(a.job_id, a.generation, r.info.rank()) << " (" << reason
                     << "): " << s;
    return s;
  }
  BATON_LOG(INFO) << Describe(a.job_id, a.generation, r.info.rank()) << " pid " << r.info.pid()
                  << ": " << RankStateName(from) << " -> " << RankStateName(to) << " (" << reason
                  << ")";
  return absl::OkStatus();
}

int64_t Supervisor::illegal_rank_transitions() const {
  absl::MutexLock lock(&mu_);
  return illegal_rank_transitions_;
}

// ---------------------------------------------------------------------------------------
// Start / stop.
// ---------------------------------------------------------------------------------------

absl::Status Supervisor::StopAssignment(const std::string& job_id, int64_t generation,
                                        std::optional<absl::Duration> grace, bool keep_waiting) {
  const absl::Duration g = grace.value_or(options_.default_stop_grace);
  bool found = false;
  bool failed = false;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, a] : assignments_) {
      if (a.job_id != job_id || (generation != 0 && a.generation != generation)) continue;
      found = true;
      failed |= StopRanksLocked(a, g, "StopRequested", keep_waiting);
    }
  }
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("no assignment of job ", job_id, " generation ", generation));
  }
  if (failed) listener_->OnReportsPending();
  ArmDeadlineTimer();
  return absl::OkStatus();
}

int Supervisor::KillAllLocked(absl::string_view reason, bool* failed) {
  int live = 0;
  for (Parked& p : parked_) {
    ++live;
    absl::Status s = p.process->SignalGroup(SIGKILL);
    if (!s.ok()) BATON_LOG(WARNING) << s;
    p.release_at = p.kill_at = absl::InfiniteFuture();
  }
  for (auto& [key, a] : assignments_) {
    for (const RankEntry& r : a.ranks) {
      const RankState state = r.lifecycle.state();
      if (state == RankState::kRunning || state == RankState::kStopping ||
          (a.phase == Phase::kSpawning && state == RankState::kStarting)) {
        ++live;
      }
    }
    *failed |= StopRanksLocked(a, absl::ZeroDuration(), reason);
  }
  return live;
}

void Supervisor::SetLeaseExpiry(absl::Time expiry) {
  // The launcher's fence first (the shims' own deadline, kept even if this daemon hangs):
  // it counts from now, so convert before anything else takes time.
  launcher_->SetLeaseRemaining(expiry == absl::InfiniteFuture() ? absl::InfiniteDuration()
                                                                : expiry - clock_->Now());
  bool failed = false;
  {
    absl::MutexLock lock(&mu_);
    if (expiry == lease_expiry_) return;
    // A lease that lapsed before its timer ran (this daemon was stopped or starved of CPU)
    // is enforced before it is replaced: what ran under it is killed, the lapse is logged.
    failed = EnforceDeadlinesLocked();
    lease_expiry_ = expiry;
    lease_enforced_ = false;
  }
  if (failed) listener_->OnReportsPending();
  ArmDeadlineTimer();
}

int64_t Supervisor::lease_expirations() const {
  absl::MutexLock lock(&mu_);
  return lease_expirations_;
}

absl::Status Supervisor::RequestCheckpoint(const std::string& job_id, int64_t generation,
                                           int32_t rank) {
  absl::MutexLock lock(&mu_);
  auto it = assignments_.find({job_id, generation});
  RankEntry* entry = nullptr;
  if (it != assignments_.end()) {
    for (RankEntry& r : it->second.ranks) {
      if (r.info.rank() == rank) entry = &r;
    }
  }
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat("no rank ", rank, " of job ", job_id, " generation ",
                                            generation, " on this worker"));
  }
  if (entry->lifecycle.state() != RankState::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " of job ", job_id, " generation ", generation, " is ",
                     RankStateName(entry->lifecycle.state()), ", not running"));
  }
  return entry->process->SignalGroup(SIGUSR1);
}

absl::StatusOr<const Supervisor::RankEntry*> Supervisor::ProfiledRankLocked(
    const std::string& job_id, int64_t generation, int32_t rank) const {
  auto it = assignments_.find({job_id, generation});
  const RankEntry* entry = nullptr;
  if (it != assignments_.end()) {
    for (const RankEntry& r : it->second.ranks) {
      if (r.info.rank() == rank) entry = &r;
    }
  }
  if (entry == nullptr) {
    return absl::NotFoundError(absl::StrCat("no rank ", rank, " of job ", job_id, " generation ",
                                            generation, " on this worker"));
  }
  if (!it->second.request.spec().has_trainer()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " runs a command; profiling needs the built-in trainer"));
  }
  if (entry->lifecycle.state() != RankState::kRunning || entry->process == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " of job ", job_id, " generation ", generation, " is ",
                     RankStateName(entry->lifecycle.state()), ", not running"));
  }
  return entry;
}

absl::StatusOr<Supervisor::ProfileDirPath> Supervisor::ProfileDir(const std::string& job_id,
                                                                  int64_t generation,
                                                                  int32_t rank) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<const RankEntry*> entry = ProfiledRankLocked(job_id, generation, rank);
  if (!entry.ok()) return entry.status();
  return ProfileDirPath{JobDir(options_.work_dir, job_id),
                        absl::StrCat(RankSubdir(generation, rank), "/", kRankProfileSubdir)};
}

absl::Status Supervisor::SignalProfile(const std::string& job_id, int64_t generation,
                                       int32_t rank) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<const RankEntry*> entry = ProfiledRankLocked(job_id, generation, rank);
  if (!entry.ok()) return entry.status();
  return (*entry)->process->SignalGroup(SIGUSR2);
}

bool Supervisor::StopRanksLocked(Assignment& a, absl::Duration grace, absl::string_view reason,
                                 bool keep_waiting) {
  if (a.phase == Phase::kAccepted) {
    FailLocked(a, std::string(reason),
               absl::StrCat("stopped (", reason, ") before its processes started"));
    return true;
  }
  if (a.phase == Phase::kSpawning) {
    if (!a.stop_while_spawning.has_value()) {
      a.stop_while_spawning = Stop{grace, std::string(reason)};
    } else {
      a.stop_while_spawning->grace = std::min(a.stop_while_spawning->grace, grace);
    }
    return false;
  }
  const absl::Time now = clock_->Now();
  bool parked = false;
  for (RankEntry& r : a.ranks) {
    const RankState state = r.lifecycle.state();
    if (state != RankState::kRunning && state != RankState::kStopping) continue;
    if (state == RankState::kRunning && keep_waiting && r.rejoin.valid() &&
        options_.rejoin_timeout > absl::ZeroDuration()) {
      if (r.waiting) {
        ParkLocked(a, r);
        parked = true;
      } else if (r.park_deadline == absl::InfiniteFuture()) {
        // Not signalled meanwhile: a SIGTERM would end the wait it is about to begin.
        r.park_deadline = now + options_.rejoin_timeout;
        r.park_grace = grace;
        r.park_reason = std::string(reason);
      }
      continue;
    }
    r.park_deadline = absl::InfiniteFuture();
    StopRankLocked(a, r, grace, reason);
  }
  return parked;
}

void Supervisor::StopRankLocked(Assignment& a, RankEntry& r, absl::Duration grace,
                                absl::string_view reason) {
  const RankState state = r.lifecycle.state();
  if (grace <= absl::ZeroDuration()) {
    if (!TransitionLocked(a, r, RankState::kKilling, reason).ok()) return;
    absl::Status s = r.process->SignalGroup(SIGKILL);
    if (!s.ok()) BATON_LOG(WARNING) << s;
    r.kill_deadline = absl::InfiniteFuture();
  } else if (state == RankState::kRunning) {
    if (!TransitionLocked(a, r, RankState::kStopping, reason).ok()) return;
    absl::Status s = r.process->SignalGroup(SIGTERM);
    if (!s.ok()) BATON_LOG(WARNING) << s;
    r.kill_deadline = clock_->Now() + grace;
  } else {
    r.kill_deadline = std::min(r.kill_deadline, clock_->Now() + grace);
  }
}

void Supervisor::ParkLocked(Assignment& a, RankEntry& r) {
  const absl::Time now = clock_->Now();
  baton::v1::ProcessExit kept;
  kept.set_kept_for_rejoin(true);
  *kept.mutable_time() = ToProto(now);
  if (!TransitionLocked(a, r, RankState::kExited, "KeptForRejoin").ok()) return;
  *r.info.mutable_exit() = kept;
  r.park_deadline = absl::InfiniteFuture();
  r.kill_deadline = absl::InfiniteFuture();
  Parked p;
  p.was = PumpedRank{a.job_id, a.generation, r.info.rank()};
  p.job_name = SnapshotName(a.request);
  p.local_rank = r.info.local_rank();
  p.process = r.process;
  p.rejoin = std::move(r.rejoin);
  p.release_at = now + options_.rejoin_timeout;
  parked_.push_back(std::move(p));
}

void Supervisor::ReleaseLocked(Parked& p, absl::string_view why) {
  BATON_LOG(INFO) << Describe(p.was.job_id, p.was.generation, p.was.rank) << " pid "
                  << p.process->pid() << ": released (" << why << ")";
  if (p.rejoin.valid()) ::shutdown(p.rejoin.get(), SHUT_RDWR);  // EOF: it exits.
  p.release_at = absl::InfiniteFuture();
  p.kill_at = clock_->Now() + options_.default_stop_grace;
}

void Supervisor::OnRejoinWaiting(const PumpedRank& pumped, int64_t generation) {
  bool parked = false;
  {
    absl::MutexLock lock(&mu_);
    const PumpedRank rank = TranslateLocked(pumped);
    auto it = assignments_.find({rank.job_id, rank.generation});
    if (it == assignments_.end() || rank.generation != generation) return;
    for (RankEntry& r : it->second.ranks) {
      if (r.info.rank() != rank.rank || r.lifecycle.state() != RankState::kRunning) continue;
      if (r.waiting) continue;  // Said before (a rank may repeat itself: logged once).
      BATON_LOG(INFO) << Describe(rank.job_id, rank.generation, rank.rank) << " pid "
                      << r.info.pid() << ": waits for the next generation";
      r.waiting = true;
      if (r.park_deadline != absl::InfiniteFuture()) {
        ParkLocked(it->second, r);
        parked = true;
      }
    }
  }
  if (parked) listener_->OnReportsPending();
  ArmDeadlineTimer();
}

PumpedRank Supervisor::TranslateLocked(PumpedRank rank) const {
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto& [from, to] : rebound_) {
      if (rank == from) {
        rank = to;
        changed = true;
      }
    }
  }
  return rank;
}

size_t Supervisor::parked_count() const {
  absl::MutexLock lock(&mu_);
  return parked_.size();
}

void Supervisor::EnforceDeadlines() {
  bool failed;
  {
    absl::MutexLock lock(&mu_);
    failed = EnforceDeadlinesLocked();
  }
  if (failed) listener_->OnReportsPending();
  ArmDeadlineTimer();  // The next deadline, now that these were met.
}

bool Supervisor::EnforceDeadlinesLocked() {
  const absl::Time now = clock_->Now();
  bool failed = false;
  if (!lease_enforced_ && now >= lease_expiry_) {
    lease_enforced_ = true;
    const int killed = KillAllLocked("LeaseExpired", &failed);
    if (killed > 0) ++lease_expirations_;
    BATON_LOG(WARNING) << "lease ran out at " << absl::FormatTime(lease_expiry_)
                       << " (no heartbeat acknowledged by the coordinator): "
                       << (killed > 0 ? absl::StrCat("killed ", killed,
                                                     " training process(es) so the coordinator "
                                                     "can restart them elsewhere")
                                      : std::string("no training process was left to kill"));
  }
  for (auto& [key, a] : assignments_) {
    for (RankEntry& r : a.ranks) {
      if (r.lifecycle.state() == RankState::kRunning && now >= r.park_deadline) {
        // It never said it waits: stopped as the stop asked.
        r.park_deadline = absl::InfiniteFuture();
        StopRankLocked(a, r, r.park_grace, r.park_reason);
        continue;
      }
      if (r.lifecycle.state() != RankState::kStopping || now < r.kill_deadline) continue;
      r.kill_deadline = absl::InfiniteFuture();
      if (!TransitionLocked(a, r, RankState::kKilling, "GraceExpired").ok()) continue;
      absl::Status s = r.process->SignalGroup(SIGKILL);
      if (!s.ok()) BATON_LOG(WARNING) << s;
    }
  }
  for (Parked& p : parked_) {
    if (now >= p.release_at) ReleaseLocked(p, "no next generation came for it");
    if (now >= p.kill_at) {
      p.kill_at = absl::InfiniteFuture();
      absl::Status s = p.process->SignalGroup(SIGKILL);
      if (!s.ok()) BATON_LOG(WARNING) << s;
    }
  }
  return failed;
}

absl::Time Supervisor::NextDeadlineLocked() const {
  absl::Time next = lease_enforced_ ? absl::InfiniteFuture() : lease_expiry_;
  for (const auto& [key, a] : assignments_) {
    for (const RankEntry& r : a.ranks) next = std::min({next, r.kill_deadline, r.park_deadline});
  }
  for (const Parked& p : parked_) next = std::min({next, p.release_at, p.kill_at});
  return next;
}

void Supervisor::ArmDeadlineTimer() {
  Clock::Timer replaced;  // Cancelled once mu_ is released: its callback takes mu_.
  absl::MutexLock lock(&mu_);
  const absl::Time next = NextDeadlineLocked();
  if (next == armed_deadline_) return;
  armed_deadline_ = next;
  replaced = std::move(deadline_timer_);
  if (next == absl::InfiniteFuture()) return;
  deadline_timer_ = clock_->After(next - clock_->Now(), [this] { EnforceDeadlines(); });
}

bool Supervisor::AwaitIdle(absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  auto idle_or_ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return assignments_.empty() || idle_wait_ended_;
  };
  clock_->AwaitWithDeadline(&mu_, absl::Condition(&idle_or_ended), deadline);
  return assignments_.empty();
}

void Supervisor::EndIdleWait() {
  absl::MutexLock lock(&mu_);
  idle_wait_ended_ = true;
}

void Supervisor::RecordExit(const PumpedRank& pumped, const baton::v1::ProcessExit& exit) {
  {
    absl::MutexLock lock(&mu_);
    const PumpedRank rank = TranslateLocked(pumped);
    rebound_.erase(std::remove_if(rebound_.begin(), rebound_.end(),
                                  [&](const auto& e) { return TranslateLocked(e.first) == rank; }),
                   rebound_.end());
    // A parked process that exited (released, or died waiting): nothing to report.
    const size_t parked = parked_.size();
    parked_.erase(std::remove_if(parked_.begin(), parked_.end(),
                                 [&](const Parked& p) { return p.was == rank; }),
                  parked_.end());
    if (parked_.size() != parked) return;
    auto it = assignments_.find({rank.job_id, rank.generation});
    if (it == assignments_.end()) return;
    for (RankEntry& r : it->second.ranks) {
      if (r.info.rank() != rank.rank) continue;
      // Its part ended when it was kept; this is the kept process's own end.
      if (r.info.exit().kept_for_rejoin()) return;
      const std::string reason = exit.signal() != 0
                                     ? absl::StrCat("Exited: signal ", exit.signal())
                                     : absl::StrCat("Exited: code ", exit.exit_code());
      if (!TransitionLocked(it->second, r, RankState::kExited, reason).ok()) return;
      *r.info.mutable_exit() = exit;
      if (!exit.has_time()) *r.info.mutable_exit()->mutable_time() = ToProto(clock_->Now());
      r.kill_deadline = absl::InfiniteFuture();
    }
  }
  listener_->OnReportsPending();
}

// ---------------------------------------------------------------------------------------
// Facts.
// ---------------------------------------------------------------------------------------

std::vector<AssignmentFacts> Supervisor::ListFacts() const {
  std::vector<AssignmentFacts> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, a] : assignments_) {
    if (a.launching()) continue;
    AssignmentFacts facts;
    facts.job_id = a.job_id;
    facts.generation = a.generation;
    if (a.failure.has_value()) {
      if (!a.all_exited()) continue;  // Published once none of its processes runs.
      facts.failure = *a.failure;
    } else {
      for (const RankEntry& r : a.ranks) facts.ranks.push_back(r.info);
      facts.start_requests = a.start_requests;
    }
    out.push_back(std::move(facts));
  }
  return out;
}

absl::Status Supervisor::Forget(const std::string& job_id, int64_t generation,
                                int64_t start_requests) {
  std::optional<Assignment> forgotten;  // Destroyed after the lock is released.
  absl::MutexLock lock(&mu_);
  auto it = assignments_.find({job_id, generation});
  if (it == assignments_.end()) {
    return absl::NotFoundError(
        absl::StrCat("no assignment of job ", job_id, " generation ", generation));
  }
  const Assignment& a = it->second;
  if (a.launching() || !a.all_exited()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " gen ", generation, " still has processes to report"));
  }
  if (a.start_requests != start_requests) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job_id, " gen ", generation, " was asked to start again"));
  }
  BATON_LOG(INFO) << "job " << a.job_id << " gen " << a.generation
                  << ": all ranks exited and reported; forgetting the assignment";
  devices_.Release(a.job_id, a.generation);
  forgotten = std::move(it->second);
  assignments_.erase(it);
  const bool job_left = std::none_of(assignments_.begin(), assignments_.end(),
                                     [&](const auto& e) { return e.second.job_id == job_id; });
  if (job_left) snapshot_dirs_.Idle(SnapshotName(forgotten->request), clock_->Now());
  snapshot_dirs_.Collect(clock_->Now());
  return absl::OkStatus();
}

std::optional<RankState> Supervisor::GetRankState(const std::string& job_id, int64_t generation,
                                                  int32_t rank) const {
  absl::MutexLock lock(&mu_);
  auto it = assignments_.find({job_id, generation});
  if (it == assignments_.end()) return std::nullopt;
  for (const RankEntry& r : it->second.ranks) {
    if (r.info.rank() == rank) return r.lifecycle.state();
  }
  return std::nullopt;
}

size_t Supervisor::assignment_count() const {
  absl::MutexLock lock(&mu_);
  return assignments_.size();
}

}  // namespace baton::worker
