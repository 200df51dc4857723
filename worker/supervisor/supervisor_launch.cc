// The Supervisor's assignments from acceptance to launch or failure (see supervisor.h).

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>

#include <cstring>
#include <filesystem>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/assignment_failure.h"
#include "common/logging.h"
#include "common/private_file.h"
#include "common/spec/trainer_spec.h"
#include "common/status_macros.h"
#include "common/time/proto_time.h"
#include "worker/supervisor/job_paths.h"
#include "worker/supervisor/launch_plan.h"
#include "worker/supervisor/supervisor.h"
#include "worker/trainer/contract/contract.h"
#include "worker/trainer/contract/rejoin_protocol.h"

namespace baton::worker {
namespace {

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

absl::Status ValidateRequest(const baton::v1::StartAssignment& request) {
  if (!IsSafeJobId(request.job_id())) {
    return absl::InvalidArgumentError(
        absl::StrCat("job_id \"", request.job_id(), "\" must be 1-128 of [A-Za-z0-9._-]"));
  }
  if (request.generation() < 1) return absl::InvalidArgumentError("generation must be >= 1");
  if (request.world_size() < 1) return absl::InvalidArgumentError("world_size must be >= 1");
  if (request.ranks().empty()) return absl::InvalidArgumentError("ranks is empty");
  std::set<int32_t> seen;
  for (const auto& r : request.ranks()) {
    if (r.rank() < 0 || r.rank() >= request.world_size() || !seen.insert(r.rank()).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("ranks: rank ", r.rank(), " is out of range or repeated"));
    }
  }
  return absl::OkStatus();
}

// A rank's log: 0600, never opened through a symlink (a job cannot make the worker append
// to a file of its choosing).
UniqueFd OpenLog(const std::string& path) {
  return UniqueFd(OpenPrivate(path, O_WRONLY | O_CREAT | O_APPEND));
}

// Creates what the rank will write outside its job's directory, by the checked paths of its
// spec: a declared checkpoint_dir (0700) and the rank's sample log file (0600). A confined
// rank (Landlock) cannot create entries in the directories above the work_dir, where these
// often live; made here, they are the rank's to use. Errors: FAILED_PRECONDITION.
absl::Status MakeRankFiles(const baton::v1::JobSpec& spec, int32_t rank) {
  if (!spec.checkpoint_dir().empty()) RETURN_IF_ERROR(MakePrivateDirs(spec.checkpoint_dir()));
  if (!spec.has_trainer() || spec.trainer().sample_log().empty()) return absl::OkStatus();
  const std::string path = absl::StrCat(spec.trainer().sample_log(), ".", rank);
  const UniqueFd file(OpenPrivate(path, O_WRONLY | O_CREAT | O_APPEND));
  if (!file.valid()) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot create the sample log ", path, ": ", std::strerror(errno)));
  }
  return absl::OkStatus();
}

// Tells a parked process (its socket `fd`) its part in a generation whose fresh launch would
// have had `env`. UNAVAILABLE when it cannot be written to (it exited).
absl::Status TellRejoin(int fd, const std::vector<std::string>& env) {
  ASSIGN_OR_RETURN(const std::string message, trainer::EncodeRejoinFromEnv(env));
  size_t done = 0;
  while (done < message.size()) {
    const ssize_t n =
        ::send(fd, message.data() + done, message.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      return absl::UnavailableError(
          absl::StrCat("cannot write to its socket: ", std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

}  // namespace

// What LaunchRank produced for one rank: the process (or why there is none) and its logs.
struct Supervisor::RankLaunch {
  absl::Status status;
  LaunchedProcess launched;
  UniqueFd stdout_log;
  UniqueFd stderr_log;
  bool rejoined = false;  // A parked process was told its part instead: `launched` is empty.
};

absl::StatusOr<bool> Supervisor::AcceptAssignment(const baton::v1::StartAssignment& request) {
  if (absl::Status s = ValidateRequest(request); !s.ok()) return s;
  const AssignmentKey key(request.job_id(), request.generation());
  {
    absl::MutexLock lock(&mu_);
    if (shutting_down_) return absl::UnavailableError("the worker is shutting down");
    auto it = assignments_.find(key);
    if (it == assignments_.end()) {
      Assignment a;
      a.request = request;
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
      return true;
    }
    Assignment& a = it->second;
    if (a.launching() || a.failure.has_value()) return false;
    ++a.start_requests;
  }
  BATON_LOG(INFO) << "job " << key.first << " gen " << key.second
                  << ": already started; reporting it again";
  listener_->OnReportsPending();
  return false;
}

absl::Status Supervisor::StartAssignment(const baton::v1::StartAssignment& request) {
  absl::StatusOr<bool> accepted = AcceptAssignment(request);
  if (!accepted.ok()) return accepted.status();
  if (*accepted) (void)LaunchAssignment(request.job_id(), request.generation());
  return absl::OkStatus();
}

absl::Status Supervisor::FailAssignment(const std::string& job_id, int64_t generation,
                                        const std::string& reason, const std::string& message) {
  {
    absl::MutexLock lock(&mu_);
    auto it = assignments_.find({job_id, generation});
    if (it == assignments_.end() || it->second.phase != Phase::kAccepted) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " gen ", generation, " is not waiting for its launch"));
    }
    FailLocked(it->second, reason, message);
  }
  listener_->OnReportsPending();
  return absl::OkStatus();
}

void Supervisor::FailLocked(Assignment& a, const std::string& reason, const std::string& message) {
  BATON_LOG(WARNING) << "job " << a.job_id << " gen " << a.generation << " failed (" << reason
                     << "): " << message;
  for (RankEntry& r : a.ranks) {
    if (r.lifecycle.state() == RankState::kStarting) {
      (void)TransitionLocked(a, r, RankState::kExited, absl::StrCat("NotStarted: ", reason));
    }
  }
  a.phase = Phase::kLaunched;
  baton::v1::AssignmentFailed failure;
  failure.set_job_id(a.job_id);
  failure.set_generation(a.generation);
  failure.set_reason(reason);
  failure.set_code(AssignmentFailureFromReason(reason));
  failure.set_message(message);
  a.failure = std::move(failure);
}

absl::Status Supervisor::LaunchAssignment(const std::string& job_id, int64_t generation) {
  const AssignmentKey key(job_id, generation);
  baton::v1::StartAssignment request;
  std::string lease_expired;  // Why it failed at once, if it did.
  std::string devices_busy;   // Or this.
  std::vector<std::string> devices;
  std::string snapshot_dir;  // Empty: none.
  // Per rank of the request: the socket (a dup) of a parked process of the job with its
  // local rank, which it takes instead of spawning one.
  std::vector<UniqueFd> rejoin;
  {
    absl::MutexLock lock(&mu_);
    auto it = assignments_.find(key);
    if (it == assignments_.end() || it->second.phase != Phase::kAccepted) {
      return absl::FailedPreconditionError(
          absl::StrCat("job ", job_id, " gen ", generation, " is not waiting for its launch"));
    }
    Assignment& a = it->second;
    if (clock_->Now() >= lease_expiry_) {
      lease_expired =
          absl::StrCat("the worker's lease ran out at ", absl::FormatTime(lease_expiry_),
                       "; it starts nothing until it registers again");
      FailLocked(a, "LeaseExpired", lease_expired);
    } else if (absl::StatusOr<std::vector<std::string>> taken =
                   devices_.Acquire(job_id, generation, a.request.ranks_size());
               !taken.ok()) {
      devices_busy = std::string(taken.status().message());
      FailLocked(a, "DevicesBusy", devices_busy);
    } else {
      devices = *std::move(taken);  // Held until the assignment is forgotten.
      a.phase = Phase::kSpawning;
      request = a.request;
      TakeParkedLocked(a, rejoin);
      if (snapshot_dirs_.enabled()) {
        // Without one the ranks run on without snapshots (recovery from the disk checkpoints).
        absl::StatusOr<std::string> dir = snapshot_dirs_.Use(SnapshotName(a.request));
        if (dir.ok()) {
          snapshot_dir = *std::move(dir);
        } else {
          BATON_LOG(WARNING) << "job " << job_id << " gen " << generation << ": " << dir.status();
        }
      }
    }
  }
  if (!lease_expired.empty()) {
    listener_->OnReportsPending();
    return absl::UnavailableError(lease_expired);
  }
  if (!devices_busy.empty()) {
    listener_->OnReportsPending();
    return absl::FailedPreconditionError(devices_busy);
  }

  // The spec's paths, resolved on this machine, then the dataset's files in them (both may
  // block on a mount: without the lock).
  const char* refusal = "PathNotAllowed";
  absl::Status paths =
      CheckJobPaths(request.spec(), job_id, PathPolicy{options_.work_dir, options_.allowed_paths});
  if (paths.ok() && request.spec().has_trainer()) {
    refusal = "DataNotFound";
    paths = CheckTrainerSpecPaths(request.spec().trainer());
  }
  if (!paths.ok()) {
    {
      absl::MutexLock lock(&mu_);
      FailLocked(assignments_.at(key), refusal, std::string(paths.message()));
      ReleaseParkedLocked(job_id, generation);
    }
    ArmDeadlineTimer();
    listener_->OnReportsPending();
    return paths;
  }

  // Spawn without the lock, in rank order, until one fails.
  std::vector<RankLaunch> launches;
  launches.reserve(request.ranks_size());
  for (int i = 0; i < request.ranks_size(); ++i) {
    launches.push_back(LaunchRank(request, request.ranks(i), devices, snapshot_dir,
                                  rejoin.empty() ? -1 : rejoin[i].get()));
    if (!launches.back().status.ok()) break;
  }
  rejoin.clear();

  absl::Status failed;
  {
    absl::MutexLock lock(&mu_);
    failed = FinishLaunchLocked(assignments_.at(key), launches);  // Kept while spawning.
  }
  if (!failed.ok()) {
    ReportSpawnFailure(job_id, generation, request.ranks(launches.size() - 1).rank(),
                       launches.back());
  }
  ArmDeadlineTimer();  // A stop or a lease expiry while spawning set deadlines.
  listener_->OnReportsPending();
  return failed;
}

absl::Status Supervisor::FinishLaunchLocked(Assignment& a, std::vector<RankLaunch>& launches) {
  absl::Status failed;
  for (size_t i = 0; i < launches.size(); ++i) {
    RankEntry& r = a.ranks[i];
    RankLaunch& l = launches[i];
    if (!l.status.ok()) {
      failed = l.status;
      (void)TransitionLocked(a, r, RankState::kExited, "SpawnFailed");
      continue;
    }
    const PumpedRank now{a.job_id, a.generation, r.info.rank()};
    if (l.rejoined) {
      if (absl::Status s = AdoptLocked(a, r, std::move(l)); !s.ok()) {
        failed = s;
        (void)TransitionLocked(a, r, RankState::kExited, "RejoinFailed");
      }
      continue;
    }
    r.process = l.launched.process;
    r.info.set_pid(r.process->pid());
    (void)TransitionLocked(a, r, RankState::kRunning, "Spawned");
    UniqueFd rejoin_read;
    if (l.launched.stdin_fd.valid()) {
      r.rejoin = std::move(l.launched.stdin_fd);
      rejoin_read = UniqueFd(::fcntl(r.rejoin.get(), F_DUPFD_CLOEXEC, 0));
    }
    pump_.Add(RankPipes{now, r.process, std::move(l.launched.stdout_fd),
                        std::move(l.launched.stderr_fd), std::move(l.launched.metrics_fd),
                        std::move(l.stdout_log), std::move(l.stderr_log), std::move(rejoin_read)});
  }
  ReleaseParkedLocked(a.job_id, a.generation);
  a.phase = Phase::kLaunched;
  if (!failed.ok()) {
    // The ranks spawned cannot form the world without the failed one.
    const int32_t rank = a.ranks[launches.size() - 1].info.rank();
    FailLocked(a, "LaunchFailed", absl::StrCat("rank ", rank, ": ", failed.message()));
    (void)StopRanksLocked(a, absl::ZeroDuration(), "LaunchFailed");
    return failed;
  }
  a.start_requests = 1;
  if (a.stop_while_spawning.has_value()) {
    (void)StopRanksLocked(a, a.stop_while_spawning->grace, a.stop_while_spawning->reason);
  }
  return absl::OkStatus();
}

void Supervisor::TakeParkedLocked(Assignment& a, std::vector<UniqueFd>& rejoin) {
  rejoin.clear();
  // A confined rank can use only the files outside its job's directory that existed when it
  // was confined (Landlock binds rules to inodes): a sample log is one file per rank, so a
  // process that would change rank cannot open its new one.
  const bool per_rank_files =
      a.request.spec().has_trainer() && !a.request.spec().trainer().sample_log().empty();
  const std::string job_name = SnapshotName(a.request);
  for (int i = 0; i < a.request.ranks_size(); ++i) {
    for (Parked& p : parked_) {
      if (p.taken || p.job_name != job_name || p.was.generation >= a.generation ||
          p.local_rank != a.request.ranks(i).local_rank() || !p.rejoin.valid() ||
          p.kill_at != absl::InfiniteFuture() ||
          (per_rank_files && p.was.rank != a.request.ranks(i).rank())) {
        continue;
      }
      UniqueFd dup(::fcntl(p.rejoin.get(), F_DUPFD_CLOEXEC, 0));
      if (!dup.valid()) break;
      if (rejoin.empty()) rejoin.resize(a.request.ranks_size());
      rejoin[i] = std::move(dup);
      p.taken = true;
      p.release_at = absl::InfiniteFuture();
      a.ranks[i].rejoining = p.was;
      break;
    }
  }
}

void Supervisor::ReleaseParkedLocked(const std::string& job_id, int64_t generation) {
  for (Parked& p : parked_) {
    if (p.was.job_id == job_id && p.was.generation < generation &&
        p.kill_at == absl::InfiniteFuture()) {
      ReleaseLocked(p, absl::StrCat("generation ", generation, " does not take it here"));
    }
  }
}

absl::Status Supervisor::AdoptLocked(Assignment& a, RankEntry& r, RankLaunch launch) {
  auto it = std::find_if(parked_.begin(), parked_.end(),
                         [&](const Parked& p) { return p.taken && p.was == *r.rejoining; });
  if (it == parked_.end()) {
    return absl::UnavailableError(absl::StrCat("the process of ", r.rejoining->job_id, " gen ",
                                               r.rejoining->generation, " rank ", r.rejoining->rank,
                                               " exited before it rejoined"));
  }
  const PumpedRank was = it->was;
  r.process = it->process;
  r.rejoin = std::move(it->rejoin);
  parked_.erase(it);
  r.info.set_pid(r.process->pid());
  (void)TransitionLocked(
      a, r, RankState::kRunning,
      absl::StrCat("Rejoined (was gen ", was.generation, " rank ", was.rank, ")"));
  const PumpedRank now{a.job_id, a.generation, r.info.rank()};
  pump_.Rebind(was, now, std::move(launch.stdout_log), std::move(launch.stderr_log));
  rebound_.emplace_back(was, now);
  return absl::OkStatus();
}

void Supervisor::ReportSpawnFailure(const std::string& job_id, int64_t generation, int32_t rank,
                                    RankLaunch& launch) {
  baton::v1::LogLine line;
  line.set_generation(generation);
  line.set_rank(rank);
  line.set_stream(baton::v1::LogLine::STREAM_STDERR);
  line.set_text(absl::StrCat("baton-worker: cannot start rank ", line.rank(), ": ",
                             launch.status.ToString()));
  *line.mutable_time() = ToProto(clock_->Now());
  BATON_LOG(WARNING) << line.text();
  if (launch.stderr_log.valid()) {
    const std::string text = line.text() + "\n";
    (void)WriteAll(launch.stderr_log.get(), text.data(), text.size());
  }
  listener_->OnLogLine(job_id, std::move(line));
}

Supervisor::RankLaunch Supervisor::LaunchRank(const baton::v1::StartAssignment& request,
                                              const baton::v1::RankInfo& rank,
                                              const std::vector<std::string>& devices,
                                              const std::string& snapshot_dir, int rejoin) {
  RankLaunch out;
  absl::StatusOr<RankLaunchPlan> plan = PlanRankLaunch(
      request, rank, devices, {options_.work_dir, options_.trainer_path, options_.base_env});
  if (!plan.ok()) {
    out.status = plan.status();
    return out;
  }
  // Created 0700: <work_dir>/jobs, the job's directory and its rank directories.
  for (const std::string& dir : plan->required_dirs) {
    if (absl::Status made = MakePrivateDirs(dir); !made.ok()) {
      out.status = absl::InternalError(made.message());
      return out;
    }
  }
  out.stdout_log = OpenLog(plan->rank_dir + "/stdout.log");
  out.stderr_log = OpenLog(plan->rank_dir + "/stderr.log");
  if (!out.stdout_log.valid() || !out.stderr_log.valid()) {
    out.status = absl::InternalError(
        absl::StrCat("cannot open logs in ", plan->rank_dir, ": ", std::strerror(errno)));
    return out;
  }
  for (const std::string& dir : plan->best_effort_dirs) (void)MakePrivateDirs(dir);
  if (absl::Status made = MakeRankFiles(request.spec(), rank.rank()); !made.ok()) {
    out.status = made;
    return out;
  }
  LaunchRequest& launch = plan->request;
  if (!snapshot_dir.empty()) {
    launch.env.push_back(absl::StrCat(trainer::kEnvSnapshotDir, "=", snapshot_dir));
  }
  if (launch.builtin_trainer && options_.rejoin_timeout > absl::ZeroDuration()) {
    // Its stdin, a socket to this worker (trainer/contract/rejoin_protocol.h).
    launch.pipe_stdin = true;
    launch.env.push_back(absl::StrCat(trainer::kEnvRejoinFd, "=0"));
  }
  if (rejoin >= 0) {
    absl::Status told = TellRejoin(rejoin, launch.env);
    if (told.ok()) {
      out.rejoined = true;
      return out;
    }
    BATON_LOG(WARNING) << Describe(request.job_id(), request.generation(), rank.rank())
                       << ": the parked process of local rank " << rank.local_rank()
                       << " cannot rejoin (" << told << "); starting a new one";
  }
  if (options_.confine_ranks) {
    absl::StatusOr<FsIsolation> isolation =
        IsolationFor(request.job_id(),
                     PathPolicy{options_.work_dir, options_.allowed_paths, options_.secret_files,
                                snapshot_dir.empty() ? std::string() : options_.snapshot_root,
                                SnapshotName(request)});
    if (!isolation.ok()) {
      out.status = isolation.status();
      return out;
    }
    launch.isolation = *std::move(isolation);
  }
  for (const std::string& name : plan->ignored_env) {
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

}  // namespace baton::worker
