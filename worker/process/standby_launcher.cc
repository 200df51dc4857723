#include "worker/process/standby_launcher.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <optional>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/logging.h"
#include "common/metrics_http.h"
#include "common/spec/job_spec.h"
#include "worker/host/clock_poll.h"
#include "worker/process/fs_isolation.h"
#include "worker/trainer/contract/standby_protocol.h"

namespace baton::worker {
namespace {

// The one reserved name MatchKey keeps: a standby serves only the job it was started for.
constexpr absl::string_view kJobIdPrefix = "BATON_JOB_ID=";

// True once `fd` is readable or hung up: for a Process's exit_fd, the process has news
// (exited, or its shim died). Never blocks and consumes nothing.
bool HasNews(int fd) {
  struct pollfd pfd = {fd, POLLIN, 0};
  int n;
  do {
    n = ::poll(&pfd, 1, 0);
  } while (n < 0 && errno == EINTR);
  return n > 0 && pfd.revents != 0;
}

// The last non-empty line the (exited) standby wrote to stderr, if any.
std::string LastStderrLine(int fd) {
  std::string text;
  char buf[4096];
  ssize_t n;
  while (text.size() < 64 * 1024 && (n = ::read(fd, buf, sizeof(buf))) > 0) {
    text.append(buf, static_cast<size_t>(n));
  }
  std::string last;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    last = std::string(absl::StripAsciiWhitespace(line));
  }
  return last;
}

std::string DescribeExit(const baton::v1::ProcessExit& exit) {
  return exit.signal() != 0 ? absl::StrCat("was killed by signal ", exit.signal())
                            : absl::StrCat("exited with code ", exit.exit_code());
}

// What a handoff sends: the rank's confinement, which the standby applies to itself before
// it reads the rest, and the encoded request.
struct PreparedHandoff {
  UniqueFd ruleset;  // Invalid: no confinement.
  std::string wire;
};

// The handoff of `request`; nullopt if the ruleset or the request cannot be built (the cold
// path, which builds them again, reports why).
std::optional<PreparedHandoff> PrepareHandoff(const LaunchRequest& request) {
  absl::StatusOr<UniqueFd> built = LauncherRuleset(request.isolation);
  if (!built.ok()) return std::nullopt;
  trainer::StandbyRequest handoff;
  handoff.argv = request.argv;
  handoff.env = request.env;
  handoff.working_dir = request.working_dir;
  handoff.confined = built->valid();
  absl::StatusOr<std::string> encoded = trainer::EncodeStandbyRequest(handoff);
  if (!encoded.ok()) return std::nullopt;
  return PreparedHandoff{*std::move(built), *std::move(encoded)};
}

// Whether this process may move a thread from SCHED_IDLE back to SCHED_OTHER at niceness
// 0: an RLIMIT_NICE that allows 0, or CAP_SYS_NICE (bit 23 of <linux/capability.h>) in its
// effective set.
bool MayLeaveIdlePriority() {
  struct rlimit limit;
  if (::getrlimit(RLIMIT_NICE, &limit) == 0 &&
      (limit.rlim_cur == RLIM_INFINITY || limit.rlim_cur >= 20)) {
    return true;
  }
  constexpr int kCapSysNice = 23;
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);) {
    absl::string_view value = line;
    if (!absl::ConsumePrefix(&value, "CapEff:")) continue;
    uint64_t caps = 0;
    return absl::SimpleHexAtoi(absl::StripAsciiWhitespace(value), &caps) &&
           ((caps >> kCapSysNice) & 1) != 0;
  }
  return false;
}

// Sets every thread of `pid` to SCHED_OTHER (on Linux a policy is per thread). The process
// is an idle standby: no thread starts meanwhile. PERMISSION_DENIED or UNAVAILABLE (the
// process is gone) naming the OS error.
absl::Status LeaveIdlePriority(pid_t pid) {
  const std::string dir = absl::StrCat("/proc/", pid, "/task");
  DIR* tasks = ::opendir(dir.c_str());
  if (tasks == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot list ", dir, ": ", ::strerror(errno)));
  }
  absl::Status status;
  while (const struct dirent* entry = ::readdir(tasks)) {
    int tid = 0;
    if (!absl::SimpleAtoi(entry->d_name, &tid)) continue;
    const struct sched_param param = {};
    if (::sched_setscheduler(tid, SCHED_OTHER, &param) != 0 && errno != ESRCH) {
      status = absl::PermissionDeniedError(absl::StrCat(
          "cannot set thread ", tid, " back from SCHED_IDLE: ", ::strerror(errno)));
      break;
    }
  }
  ::closedir(tasks);
  return status;
}

}  // namespace

StandbyLauncher::StandbyLauncher(StandbyLauncherOptions options, ProcessLauncher* inner,
                                 Clock* clock)
    : options_(std::move(options)),
      inner_(inner),
      clock_(clock),
      standbys_idle_(options_.idle_priority && MayLeaveIdlePriority()) {
  if (!options_.env.empty()) template_key_ = MatchKey(options_.env);
  if (options_.idle_priority && !standbys_idle_) {
    BATON_LOG(INFO) << "standby trainers start at the worker's CPU priority: setting a "
                       "standby back from SCHED_IDLE at handoff needs CAP_SYS_NICE";
  }
}

StandbyLauncher::~StandbyLauncher() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  Wake();
  if (thread_.joinable()) thread_.join();
  std::vector<std::unique_ptr<Standby>> unused;
  {
    absl::MutexLock lock(&mu_);
    unused.swap(pool_);
    for (auto& s : retired_) unused.push_back(std::move(s));
    retired_.clear();
  }
  // Each Standby closes its stdin (the standby exits 0) and its shim's control socket (the
  // shim SIGKILLs what is left of the group and is reaped).
  unused.clear();
}

absl::Status StandbyLauncher::Start() {
  if (options_.standbys <= 0 || thread_.joinable()) return absl::OkStatus();
  if (absl::Status s = MakePipe(&wake_read_, &wake_write_, O_NONBLOCK, O_NONBLOCK); !s.ok()) {
    return s;
  }
  thread_ = std::thread([this] { MaintenanceLoop(); });
  return absl::OkStatus();
}

void StandbyLauncher::Wake() {
  if (!wake_write_.valid()) return;
  const char byte = 1;
  (void)!::write(wake_write_.get(), &byte, 1);  // A full pipe already means "wake up".
}

void StandbyLauncher::MaintenanceLoop() {
  for (;;) {
    ReconcileOnce();
    std::vector<struct pollfd> fds = {{wake_read_.get(), POLLIN, 0}};
    absl::Time deadline;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      // An exit fd is readable once its standby exited. Launch() wakes this thread when it
      // takes a standby, so a handed-off one's fd is dropped from the set.
      for (const auto& standby : pool_) {
        fds.push_back({standby->launched.process->exit_fd(), POLLIN, 0});
      }
      deadline = NextUpkeepLocked();
    }
    if (absl::StatusOr<int> n = PollUntil(clock_, deadline, fds); !n.ok()) {
      BATON_LOG(ERROR) << "standby upkeep: " << n.status();
      return;
    }
    char buf[64];
    while (::read(wake_read_.get(), buf, sizeof(buf)) > 0) {
    }
  }
}

absl::Time StandbyLauncher::NextUpkeepLocked() const {
  if (!template_key_.has_value() ||
      static_cast<int>(pool_.size()) + starting_ >= options_.standbys) {
    return absl::InfiniteFuture();
  }
  return std::max(refill_not_before_, backoff_until_);
}

std::vector<std::string> StandbyLauncher::MatchKey(const std::vector<std::string>& env) {
  std::vector<std::string> key;
  key.reserve(env.size());
  for (const std::string& entry : env) {
    const size_t eq = entry.find('=');
    if (eq != std::string::npos && baton::IsReservedEnvName(entry.substr(0, eq)) &&
        !(absl::StartsWith(entry, kJobIdPrefix) && entry.size() > kJobIdPrefix.size())) {
      continue;
    }
    key.push_back(entry);
  }
  std::sort(key.begin(), key.end());
  return key;
}

bool StandbyLauncher::Serves(const std::vector<std::string>& standby_key,
                             const std::vector<std::string>& request_key) {
  if (standby_key == request_key) return true;
  auto is_job_id = [](const std::string& e) { return absl::StartsWith(e, kJobIdPrefix); };
  if (std::any_of(standby_key.begin(), standby_key.end(), is_job_id)) return false;
  std::vector<std::string> without_job = request_key;
  without_job.erase(std::remove_if(without_job.begin(), without_job.end(), is_job_id),
                    without_job.end());
  return without_job == standby_key;
}

std::unique_ptr<StandbyLauncher::Standby> StandbyLauncher::TakeStandby(
    const std::vector<std::string>& key) {
  std::unique_ptr<Standby> standby;
  {
    absl::MutexLock lock(&mu_);
    refill_not_before_ = clock_->Now() + options_.refill_delay;
    if (!template_key_.has_value() || *template_key_ != key) {
      template_key_ = key;
      for (auto it = pool_.begin(); it != pool_.end();) {
        if (Serves((*it)->env_key, key)) {
          ++it;
        } else {
          retired_.push_back(std::move(*it));
          it = pool_.erase(it);
        }
      }
    }
    PollLoadedLocked();
    if (!pool_.empty()) {
      // A loaded standby starts the rank at once; one still loading is still ahead of a
      // cold start.
      auto pick = std::find_if(pool_.begin(), pool_.end(),
                               [](const std::unique_ptr<Standby>& s) { return s->loaded; });
      if (pick == pool_.end()) pick = pool_.begin();
      standby = std::move(*pick);
      pool_.erase(pick);
    } else {
      ++stats_.misses;
    }
  }
  Wake();  // The pool, the template or the refill time changed.
  return standby;
}

absl::StatusOr<LaunchedProcess> StandbyLauncher::Launch(const LaunchRequest& request) {
  // A rank with stdin on a socket is served when that socket is its rejoin channel, which
  // the standby keeps (ApplyStandbyRequest).
  const bool stdin_served = !request.pipe_stdin || trainer::StdinIsRejoinSocket(request.env);
  if (options_.standbys <= 0 || !request.builtin_trainer || request.argv.empty() ||
      request.argv[0] != options_.trainer_path || !stdin_served) {
    return inner_->Launch(request);
  }
  // The rank's confinement and the request: built once a standby is taken (a miss leaves
  // both to the cold path).
  std::optional<PreparedHandoff> handoff;
  const std::vector<std::string> key = MatchKey(request.env);
  for (;;) {
    std::unique_ptr<Standby> standby = TakeStandby(key);
    if (standby == nullptr) break;
    // Taken out of the pool: nobody else collects its exit, so TryCollectExit is ours.
    if (HasNews(standby->launched.process->exit_fd())) {
      if (std::optional<baton::v1::ProcessExit> exit =
              standby->launched.process->TryCollectExit()) {
        OnEarlyExit(*standby, *exit);
        continue;
      }
    }
    if (standbys_idle_) {
      if (absl::Status s = LeaveIdlePriority(standby->launched.process->pid()); !s.ok()) {
        BATON_LOG(WARNING) << "standby trainer pid " << standby->launched.process->pid() << ": "
                           << s << "; killing it";
        continue;  // Destroying it kills it.
      }
    }
    if (!handoff.has_value()) handoff = PrepareHandoff(request);
    if (!handoff.has_value()) {
      // Neither can be built: the standby goes back to the pool, the cold path reports why.
      absl::MutexLock lock(&mu_);
      pool_.push_back(std::move(standby));
      break;
    }
    if (absl::Status s = Handoff(*standby, handoff->wire, handoff->ruleset.get()); !s.ok()) {
      BATON_LOG(WARNING) << "standby trainer pid " << standby->launched.process->pid() << ": " << s
                         << "; killing it";
      continue;  // Destroying it kills it.
    }
    {
      absl::MutexLock lock(&mu_);
      ++stats_.hits;
      consecutive_early_exits_ = 0;
      backoff_until_ = absl::InfinitePast();
    }
    BATON_LOG(INFO) << "launched " << request.argv[0] << " in standby pid "
                    << standby->launched.process->pid();
    LaunchedProcess out = std::move(standby->launched);
    // With pipe_stdin the rank keeps the standby's stdin socket (BATON_REJOIN_FD=0 in its
    // environment: ApplyStandbyRequest): its worker end is the caller's.
    if (!request.pipe_stdin) out.stdin_fd.Reset();
    return out;
  }
  return inner_->Launch(request);
}

absl::Status StandbyLauncher::Handoff(Standby& standby, absl::string_view wire, int ruleset) {
  const int fd = standby.launched.stdin_fd.get();
  const absl::Time deadline = clock_->Now() + options_.handoff_timeout;
  bool first = true;
  while (!wire.empty()) {
    ssize_t n;
    if (first && ruleset >= 0) {  // The ruleset travels with the request's first byte.
      struct iovec iov = {const_cast<char*>(wire.data()), wire.size()};
      alignas(struct cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
      struct msghdr msg = {};
      msg.msg_iov = &iov;
      msg.msg_iovlen = 1;
      msg.msg_control = control;
      msg.msg_controllen = sizeof(control);
      struct cmsghdr* c = CMSG_FIRSTHDR(&msg);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &ruleset, sizeof(int));
      n = ::sendmsg(fd, &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
    } else {
      n = ::send(fd, wire.data(), wire.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    if (n > 0) {
      first = false;
      wire.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("handoff failed: ", ::strerror(errno)));
    }
    std::vector<struct pollfd> fds = {{fd, POLLOUT, 0}};
    absl::StatusOr<int> ready = PollUntil(clock_, deadline, fds);
    if (!ready.ok()) {
      return absl::UnavailableError(absl::StrCat("handoff: ", ready.status().message()));
    }
    if (*ready == 0) {
      return absl::UnavailableError(absl::StrCat("handoff did not complete within ",
                                                 absl::FormatDuration(options_.handoff_timeout)));
    }
  }
  return absl::OkStatus();
}

void StandbyLauncher::OnEarlyExit(const Standby& standby, const baton::v1::ProcessExit& exit) {
  const std::string last_line = LastStderrLine(standby.launched.stderr_fd.get());
  absl::Duration backoff;
  {
    absl::MutexLock lock(&mu_);
    backoff = BackOffLocked();
  }
  BATON_LOG(WARNING) << "standby trainer pid " << standby.launched.process->pid() << " "
                     << DescribeExit(exit) << " before it was used"
                     << (last_line.empty() ? "" : absl::StrCat(" (stderr: ", last_line, ")"))
                     << "; next one in " << absl::FormatDuration(backoff);
}

absl::Duration StandbyLauncher::BackOffLocked() {
  ++stats_.early_exits;
  ++consecutive_early_exits_;
  absl::Duration backoff = options_.backoff_initial;
  for (int i = 1; i < consecutive_early_exits_ && backoff < options_.backoff_max; ++i) {
    backoff *= 2;
  }
  backoff = std::min(backoff, options_.backoff_max);
  backoff_until_ = clock_->Now() + backoff;
  return backoff;
}

void StandbyLauncher::ReconcileOnce() {
  if (options_.standbys <= 0) return;
  std::vector<std::unique_ptr<Standby>> dead, retired;
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    for (auto it = pool_.begin(); it != pool_.end();) {
      if (HasNews((*it)->launched.process->exit_fd())) {
        dead.push_back(std::move(*it));
        it = pool_.erase(it);
      } else {
        ++it;
      }
    }
    retired.swap(retired_);
  }
  retired.clear();  // Kills them.
  for (auto& standby : dead) {
    std::optional<baton::v1::ProcessExit> exit = standby->launched.process->TryCollectExit();
    if (!exit.has_value()) {  // Not expected: news but no exit. Treat it as lost.
      exit.emplace();
      exit->set_exit_code(-1);
    }
    OnEarlyExit(*standby, *exit);
  }
  dead.clear();

  int to_start = 0;
  std::vector<std::string> env;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = clock_->Now();
    if (stopping_ || !template_key_.has_value() || now < refill_not_before_ ||
        now < backoff_until_) {
      return;
    }
    to_start = options_.standbys - static_cast<int>(pool_.size()) - starting_;
    if (to_start <= 0) return;
    starting_ += to_start;
    env = *template_key_;
  }
  LaunchRequest request;
  request.argv = {options_.trainer_path, trainer::kStandbyFlag};
  request.env = env;
  request.working_dir = options_.working_dir;
  request.pipe_stdin = true;
  request.idle_priority = standbys_idle_;
  for (int i = 0; i < to_start; ++i) {
    absl::StatusOr<LaunchedProcess> launched = inner_->Launch(request);
    std::unique_ptr<Standby> standby;
    if (launched.ok()) {
      standby = std::make_unique<Standby>();
      standby->launched = *std::move(launched);
      standby->env_key = env;
    }
    absl::MutexLock lock(&mu_);
    --starting_;
    if (standby == nullptr) {
      const absl::Duration backoff = BackOffLocked();
      BATON_LOG(WARNING) << "cannot start a standby trainer: " << launched.status()
                         << "; next try in " << absl::FormatDuration(backoff);
      starting_ -= to_start - i - 1;  // The rest wait for the backoff too.
      break;
    }
    if (stopping_ || !template_key_.has_value() || *template_key_ != env) {
      retired_.push_back(std::move(standby));
    } else {
      pool_.push_back(std::move(standby));
    }
  }
}

void StandbyLauncher::PollLoadedLocked() const {
  for (const std::unique_ptr<Standby>& s : pool_) {
    if (s->loaded) continue;
    char byte = 0;
    if (::recv(s->launched.stdin_fd.get(), &byte, 1, MSG_DONTWAIT) == 1 &&
        byte == trainer::kStandbyLoaded) {
      s->loaded = true;
    }
  }
}

StandbyStats StandbyLauncher::stats() const {
  absl::MutexLock lock(&mu_);
  PollLoadedLocked();
  StandbyStats s = stats_;
  s.ready = static_cast<int>(pool_.size());
  s.loaded = static_cast<int>(std::count_if(
      pool_.begin(), pool_.end(), [](const std::unique_ptr<Standby>& p) { return p->loaded; }));
  return s;
}

std::vector<prometheus::MetricFamily> StandbyMetrics::Collect() const {
  const StandbyStats stats = launcher_->stats();
  using prometheus::MetricType;
  prometheus::MetricFamily ready =
      MakeFamily("baton_worker_standby_trainers",
                 "Warm standby baton-trainer processes waiting to become a rank, by state: loaded "
                 "(LibTorch loaded) or loading.",
                 MetricType::Gauge);
  ready.metric.push_back(MakeSample({{"state", "loaded"}}, stats.loaded, MetricType::Gauge));
  ready.metric.push_back(
      MakeSample({{"state", "loading"}}, stats.ready - stats.loaded, MetricType::Gauge));
  prometheus::MetricFamily launches =
      MakeFamily("baton_worker_trainer_launches_total",
                 "Ranks of the built-in trainer launched here, by how: start=\"standby\" (a warm "
                 "standby took the rank) or \"cold\" (fork+exec, no matching standby was ready).",
                 MetricType::Counter);
  launches.metric.push_back(
      MakeSample({{"start", "standby"}}, static_cast<double>(stats.hits), MetricType::Counter));
  launches.metric.push_back(
      MakeSample({{"start", "cold"}}, static_cast<double>(stats.misses), MetricType::Counter));
  prometheus::MetricFamily early =
      MakeFamily("baton_worker_standby_early_exits_total",
                 "Standby trainers that exited (or could not start) before a rank used them.",
                 MetricType::Counter);
  early.metric.push_back(
      MakeSample({}, static_cast<double>(stats.early_exits), MetricType::Counter));
  return {std::move(ready), std::move(launches), std::move(early)};
}

}  // namespace baton::worker
