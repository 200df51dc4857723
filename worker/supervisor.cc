#include "worker/supervisor.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/proto_time.h"
#include "worker/rank_env.h"
#include "worker/trainer_args.h"

namespace baton::worker {
namespace {

constexpr absl::Duration kShutdownMargin = absl::Seconds(5);

// Job ids become directory names: allow [A-Za-z0-9._-], not "." or "..".
bool IsSafeJobId(const std::string& id) {
  if (id.empty() || id.size() > 128 || id == "." || id == "..") return false;
  for (char c : id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return false;
    }
  }
  return true;
}

UniqueFd OpenLog(const std::string& path) {
  return UniqueFd(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
}

}  // namespace

// What LaunchRank produced for one rank: the process (or why there is none) and its logs.
struct Supervisor::RankLaunch {
  absl::Status status;
  LaunchedProcess launched;
  UniqueFd stdout_log;
  UniqueFd stderr_log;
};

std::string Supervisor::Describe(const std::string& job_id, int64_t generation, int32_t rank) {
  return absl::StrCat("job ", job_id, " gen ", generation, " rank ", rank);
}

Supervisor::Supervisor(SupervisorOptions options, ProcessLauncher* launcher, Clock* clock,
                       SupervisorListener* listener)
    : options_(std::move(options)), launcher_(launcher), clock_(clock), listener_(listener) {}

Supervisor::~Supervisor() {
  Shutdown(absl::ZeroDuration());
  Clock::Timer deadline_timer;  // Cancelled once mu_ is released: its callback takes mu_.
  absl::MutexLock lock(&mu_);
  deadline_timer = std::move(deadline_timer_);
  // Remaining Process objects die with assignments_; each kills its process group.
}

absl::Status Supervisor::Start() {
  absl::Status s = MakePipe(&wake_read_, &wake_write_, O_NONBLOCK, O_NONBLOCK);
  if (!s.ok()) return s;
  io_thread_ = std::thread([this] { IoLoop(); });
  return absl::OkStatus();
}

void Supervisor::Wake() {
  if (!wake_write_.valid()) return;
  const char byte = 1;
  (void)!::write(wake_write_.get(), &byte, 1);  // A full pipe already means "wake up".
}

void Supervisor::Shutdown(absl::Duration grace) {
  {
    absl::MutexLock lock(&mu_);
    if (!shutting_down_) {
      shutting_down_ = true;
      for (auto& [key, a] : assignments_) StopRanksLocked(a, grace, "WorkerShutdown");
    }
  }
  ArmDeadlineTimer();
  if (!io_thread_.joinable()) return;
  Wake();
  {
    absl::MutexLock lock(&mu_);
    clock_->AwaitWithDeadline(
        &mu_, absl::Condition(this, &Supervisor::AllExitedLocked),
        clock_->Now() + std::max(grace, absl::ZeroDuration()) + options_.drain_timeout +
            kShutdownMargin);
    io_stop_ = true;
  }
  Wake();
  io_thread_.join();
}

bool Supervisor::AllExitedLocked() const {
  for (const auto& [key, a] : assignments_) {
    if (a.launching) return false;
    for (const RankEntry& r : a.ranks) {
      if (!r.lifecycle.exited()) return false;
    }
  }
  return true;
}

void Supervisor::TransitionLocked(const Assignment& a, RankEntry& r, RankState to,
                                  absl::string_view reason) {
  const RankState from = r.lifecycle.state();
  absl::Status s = r.lifecycle.TransitionTo(to, clock_->Now(), reason);
  if (!s.ok()) {
    BATON_LOG(ERROR) << Describe(a.job_id, a.generation, r.info.rank()) << ": " << s;
    return;
  }
  BATON_LOG(INFO) << Describe(a.job_id, a.generation, r.info.rank()) << " pid " << r.info.pid()
                  << ": " << RankStateName(from) << " -> " << RankStateName(to) << " (" << reason
                  << ")";
}

// ---------------------------------------------------------------------------------------
// Start / stop.
// ---------------------------------------------------------------------------------------

absl::Status Supervisor::StartAssignment(const baton::v1::StartAssignment& request) {
  if (!IsSafeJobId(request.job_id())) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_id \"", request.job_id(), "\" must be 1-128 of [A-Za-z0-9._-]"));
  }
  if (request.generation() < 1) {
    return absl::InvalidArgumentError("generation must be >= 1");
  }
  if (request.world_size() < 1) return absl::InvalidArgumentError("world_size must be >= 1");
  if (request.ranks().empty()) return absl::InvalidArgumentError("ranks is empty");
  std::set<int32_t> seen;
  for (const auto& r : request.ranks()) {
    if (r.rank() < 0 || r.rank() >= request.world_size() || !seen.insert(r.rank()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ranks: rank ", r.rank(), " is out of range or repeated"));
    }
  }

  const AssignmentKey key(request.job_id(), request.generation());
  bool known = false;
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("the worker is shutting down");
    auto it = assignments_.find(key);
    if (it != assignments_.end()) {
      known = true;
      if (!it->second.launching) it->second.started_reported = false;
    } else {
      Assignment a;
      a.job_id = request.job_id();
      a.generation = request.generation();
      for (const auto& r : request.ranks()) {
        RankEntry entry;
        entry.info = r;
        entry.info.set_pid(0);
        entry.info.clear_exit();
        a.ranks.push_back(std::move(entry));
      }
      assignments_.emplace(key, std::move(a));
    }
  }
  if (known) {
    BATON_LOG(INFO) << "job " << key.first << " gen " << key.second
                    << ": already started; reporting it again";
    listener_->OnReportsPending();
    return absl::OkStatus();
  }

  // Spawn without the lock.
  std::vector<RankLaunch> launches;
  launches.reserve(request.ranks_size());
  for (const auto& r : request.ranks()) launches.push_back(LaunchRank(request, r));

  std::vector<baton::v1::LogLine> failures;
  {
    absl::MutexLock lock(&mu_);
    Assignment& a = assignments_.at(key);
    for (size_t i = 0; i < a.ranks.size(); ++i) {
      RankEntry& r = a.ranks[i];
      RankLaunch& l = launches[i];
      const RankKey rank_key{a.job_id, a.generation, r.info.rank()};
      if (!l.status.ok()) {
        TransitionLocked(a, r, RankState::kExited, "SpawnFailed");
        r.info.mutable_exit()->set_exit_code(127);
        baton::v1::LogLine line;
        line.set_generation(a.generation);
        line.set_rank(r.info.rank());
        line.set_stream(baton::v1::LogLine::STREAM_STDERR);
        line.set_text(absl::StrCat("baton-worker: cannot start rank ", r.info.rank(), ": ",
                                   l.status.ToString()));
        *line.mutable_time() = ToProto(clock_->Now());
        failures.push_back(std::move(line));
        continue;
      }
      r.process = l.launched.process;
      r.info.set_pid(r.process->pid());
      TransitionLocked(a, r, RankState::kRunning, "Spawned");
      const size_t max_line = options_.max_line_bytes;
      incoming_channels_.push_back(std::make_unique<Channel>(rank_key, Channel::Kind::kStdout,
                                                             std::move(l.launched.stdout_fd),
                                                             std::move(l.stdout_log), max_line));
      incoming_channels_.push_back(std::make_unique<Channel>(rank_key, Channel::Kind::kStderr,
                                                             std::move(l.launched.stderr_fd),
                                                             std::move(l.stderr_log), max_line));
      incoming_channels_.push_back(std::make_unique<Channel>(rank_key, Channel::Kind::kMetrics,
                                                             std::move(l.launched.metrics_fd),
                                                             UniqueFd(), max_line));
      incoming_watches_.push_back(ExitWatch{rank_key, r.process, std::nullopt});
    }
    a.launching = false;
    if (a.stop_while_launching.has_value()) {
      StopRanksLocked(a, *a.stop_while_launching, "StopRequested");
    }
  }
  for (size_t i = 0, f = 0; i < launches.size() && f < failures.size(); ++i) {
    if (launches[i].status.ok()) continue;
    BATON_LOG(WARNING) << failures[f].text();
    if (launches[i].stderr_log.valid()) {
      const std::string text = failures[f].text() + "\n";
      (void)WriteAll(launches[i].stderr_log.get(), text.data(), text.size());
    }
    listener_->OnLogLine(request.job_id(), std::move(failures[f++]));
  }
  ArmDeadlineTimer();  // A stop or a lease expiry while spawning set deadlines.
  Wake();
  listener_->OnReportsPending();
  return absl::OkStatus();
}

Supervisor::RankLaunch Supervisor::LaunchRank(const baton::v1::StartAssignment& request,
                                              const baton::v1::RankInfo& rank) {
  RankLaunch out;
  const std::string job_dir = absl::StrCat(options_.work_dir, "/jobs/", request.job_id());
  const std::string rank_dir =
      absl::StrCat(job_dir, "/gen-", request.generation(), "/rank-", rank.rank());
  std::error_code ec;
  std::filesystem::create_directories(rank_dir, ec);
  if (ec) {
    out.status = absl::InternalError(absl::StrCat("mkdir ", rank_dir, ": ", ec.message()));
    return out;
  }
  out.stdout_log = OpenLog(rank_dir + "/stdout.log");
  out.stderr_log = OpenLog(rank_dir + "/stderr.log");
  if (!out.stdout_log.valid() || !out.stderr_log.valid()) {
    out.status = absl::InternalError(
        absl::StrCat("cannot open logs in ", rank_dir, ": ", std::strerror(errno)));
    return out;
  }

  const baton::v1::JobSpec& spec = request.spec();
  LaunchRequest launch;
  launch.working_dir = rank_dir;
  if (spec.has_trainer()) {
    std::string checkpoint_dir = spec.checkpoint_dir();
    if (checkpoint_dir.empty()) {
      checkpoint_dir = job_dir + "/ckpt";
      std::filesystem::create_directories(checkpoint_dir, ec);
    }
    launch.argv = TrainerArgv(options_.trainer_path, spec.trainer(), spec.budget(), checkpoint_dir);
  } else if (spec.has_command()) {
    if (spec.command().argv().empty()) {
      out.status = absl::InvalidArgumentError("spec.command.argv is empty");
      return out;
    }
    launch.argv.assign(spec.command().argv().begin(), spec.command().argv().end());
    if (!spec.command().working_dir().empty()) launch.working_dir = spec.command().working_dir();
  } else {
    out.status = absl::InvalidArgumentError("spec has neither trainer nor command");
    return out;
  }

  RankEnvInput env;
  env.base_env = options_.base_env;
  env.job_id = request.job_id();
  env.generation = request.generation();
  env.world_size = request.world_size();
  env.master_addr = request.master_addr();
  env.master_port = request.master_port();
  env.rank = rank;
  env.spec_env.insert(spec.env().begin(), spec.env().end());
  env.metrics_fd = ProcessLauncher::kMetricsFd;
  std::vector<std::string> ignored;
  launch.env = BuildRankEnv(env, &ignored);
  for (const std::string& name : ignored) {
    BATON_LOG(WARNING) << Describe(request.job_id(), request.generation(), rank.rank())
                       << ": spec.env may not set " << name << "; ignored";
  }

  absl::StatusOr<LaunchedProcess> launched = launcher_->Launch(launch);
  if (!launched.ok()) {
    out.status = launched.status();
    return out;
  }
  out.launched = std::move(*launched);
  return out;
}

absl::Status Supervisor::StopAssignment(const std::string& job_id, int64_t generation,
                                        std::optional<absl::Duration> grace) {
  const absl::Duration g = grace.value_or(options_.default_stop_grace);
  bool found = false;
  {
    absl::MutexLock lock(&mu_);
    for (auto& [key, a] : assignments_) {
      if (a.job_id != job_id || (generation != 0 && a.generation != generation)) continue;
      found = true;
      StopRanksLocked(a, g, "StopRequested");
    }
  }
  if (!found) {
    return absl::NotFoundError(
        absl::StrCat("no assignment of job ", job_id, " generation ", generation));
  }
  ArmDeadlineTimer();
  return absl::OkStatus();
}

int Supervisor::KillAllLocked(absl::string_view reason) {
  int live = 0;
  for (auto& [key, a] : assignments_) {
    for (const RankEntry& r : a.ranks) {
      const RankState state = r.lifecycle.state();
      if (state == RankState::kRunning || state == RankState::kStopping ||
          (a.launching && state == RankState::kStarting)) {
        ++live;
      }
    }
    StopRanksLocked(a, absl::ZeroDuration(), reason);
  }
  return live;
}

void Supervisor::SetLeaseExpiry(absl::Time expiry) {
  {
    absl::MutexLock lock(&mu_);
    if (expiry == lease_expiry_) return;
    lease_expiry_ = expiry;
    lease_enforced_ = false;
  }
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
    return absl::NotFoundError(absl::StrCat("no rank ", rank, " of job ", job_id,
                                            " generation ", generation, " on this worker"));
  }
  if (entry->lifecycle.state() != RankState::kRunning) {
    return absl::FailedPreconditionError(
        absl::StrCat("rank ", rank, " of job ", job_id, " generation ", generation, " is ",
                     RankStateName(entry->lifecycle.state()), ", not running"));
  }
  return entry->process->SignalGroup(SIGUSR1);
}

void Supervisor::StopRanksLocked(Assignment& a, absl::Duration grace, absl::string_view reason) {
  if (a.launching) {
    a.stop_while_launching =
        std::min(a.stop_while_launching.value_or(absl::InfiniteDuration()), grace);
    return;
  }
  const absl::Time now = clock_->Now();
  for (RankEntry& r : a.ranks) {
    const RankState state = r.lifecycle.state();
    if (state != RankState::kRunning && state != RankState::kStopping) continue;
    if (grace <= absl::ZeroDuration()) {
      absl::Status s = r.process->SignalGroup(SIGKILL);
      if (!s.ok()) BATON_LOG(WARNING) << s;
      TransitionLocked(a, r, RankState::kKilling, reason);
      r.kill_deadline = absl::InfiniteFuture();
    } else if (state == RankState::kRunning) {
      absl::Status s = r.process->SignalGroup(SIGTERM);
      if (!s.ok()) BATON_LOG(WARNING) << s;
      TransitionLocked(a, r, RankState::kStopping, reason);
      r.kill_deadline = now + grace;
    } else {
      r.kill_deadline = std::min(r.kill_deadline, now + grace);
    }
  }
}

void Supervisor::EnforceDeadlines() {
  {
    absl::MutexLock lock(&mu_);
    EnforceDeadlinesLocked();
  }
  ArmDeadlineTimer();  // The next deadline, now that these were met.
}

void Supervisor::EnforceDeadlinesLocked() {
  const absl::Time now = clock_->Now();
  if (!lease_enforced_ && now >= lease_expiry_) {
    lease_enforced_ = true;
    if (const int killed = KillAllLocked("LeaseExpired"); killed > 0) {
      ++lease_expirations_;
      BATON_LOG(WARNING) << "lease ran out at " << absl::FormatTime(lease_expiry_)
                         << " (no heartbeat acknowledged by the coordinator): killed " << killed
                         << " training process(es) so the coordinator can restart them elsewhere";
    }
  }
  for (auto& [key, a] : assignments_) {
    for (RankEntry& r : a.ranks) {
      if (r.lifecycle.state() != RankState::kStopping || now < r.kill_deadline) continue;
      absl::Status s = r.process->SignalGroup(SIGKILL);
      if (!s.ok()) BATON_LOG(WARNING) << s;
      TransitionLocked(a, r, RankState::kKilling, "GraceExpired");
      r.kill_deadline = absl::InfiniteFuture();
    }
  }
}

absl::Time Supervisor::NextDeadlineLocked() const {
  absl::Time next = lease_enforced_ ? absl::InfiniteFuture() : lease_expiry_;
  for (const auto& [key, a] : assignments_) {
    for (const RankEntry& r : a.ranks) next = std::min(next, r.kill_deadline);
  }
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

// ---------------------------------------------------------------------------------------
// Reports.
// ---------------------------------------------------------------------------------------

Supervisor::PendingReports Supervisor::GetPendingReports() const {
  PendingReports out;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, a] : assignments_) {
    if (a.launching) continue;
    if (!a.started_reported) {
      baton::v1::AssignmentStarted started;
      started.set_job_id(a.job_id);
      started.set_generation(a.generation);
      for (const RankEntry& r : a.ranks) {
        baton::v1::RankInfo* info = started.add_ranks();
        *info = r.info;
        info->clear_exit();
      }
      out.started.push_back(std::move(started));
    }
    for (const RankEntry& r : a.ranks) {
      if (!r.lifecycle.exited() || r.exit_reported) continue;
      baton::v1::ProcessExited exited;
      exited.set_job_id(a.job_id);
      exited.set_generation(a.generation);
      exited.set_rank(r.info.rank());
      *exited.mutable_exit() = r.info.exit();
      out.exited.push_back(std::move(exited));
    }
  }
  return out;
}

void Supervisor::MaybeForgetLocked(std::map<AssignmentKey, Assignment>::iterator it,
                                   std::vector<Assignment>* forgotten) {
  const Assignment& a = it->second;
  if (a.launching || !a.started_reported) return;
  for (const RankEntry& r : a.ranks) {
    if (!r.lifecycle.exited() || !r.exit_reported) return;
  }
  BATON_LOG(INFO) << "job " << a.job_id << " gen " << a.generation
                  << ": all ranks exited and reported; forgetting the assignment";
  forgotten->push_back(std::move(it->second));
  assignments_.erase(it);
}

void Supervisor::MarkReported(const baton::v1::AssignmentStarted& started) {
  std::vector<Assignment> forgotten;  // Destroyed after the lock is released.
  absl::MutexLock lock(&mu_);
  auto it = assignments_.find({started.job_id(), started.generation()});
  if (it == assignments_.end() || it->second.launching) return;
  it->second.started_reported = true;
  MaybeForgetLocked(it, &forgotten);
}

void Supervisor::MarkReported(const baton::v1::ProcessExited& exited) {
  std::vector<Assignment> forgotten;
  absl::MutexLock lock(&mu_);
  auto it = assignments_.find({exited.job_id(), exited.generation()});
  if (it == assignments_.end()) return;
  for (RankEntry& r : it->second.ranks) {
    if (r.info.rank() == exited.rank() && r.lifecycle.exited()) r.exit_reported = true;
  }
  MaybeForgetLocked(it, &forgotten);
}

std::vector<baton::v1::AssignmentStatus> Supervisor::Snapshot() const {
  std::vector<baton::v1::AssignmentStatus> out;
  absl::MutexLock lock(&mu_);
  for (const auto& [key, a] : assignments_) {
    if (a.launching) continue;
    baton::v1::AssignmentStatus status;
    status.set_job_id(a.job_id);
    status.set_generation(a.generation);
    for (const RankEntry& r : a.ranks) *status.add_ranks() = r.info;
    out.push_back(std::move(status));
  }
  return out;
}

void Supervisor::MarkReported(const std::vector<baton::v1::AssignmentStatus>& snapshot) {
  std::vector<Assignment> forgotten;
  absl::MutexLock lock(&mu_);
  for (const baton::v1::AssignmentStatus& status : snapshot) {
    auto it = assignments_.find({status.job_id(), status.generation()});
    if (it == assignments_.end() || it->second.launching) continue;
    it->second.started_reported = true;
    for (const baton::v1::RankInfo& info : status.ranks()) {
      if (!info.has_exit()) continue;
      for (RankEntry& r : it->second.ranks) {
        if (r.info.rank() == info.rank() && r.lifecycle.exited()) r.exit_reported = true;
      }
    }
    MaybeForgetLocked(it, &forgotten);
  }
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
