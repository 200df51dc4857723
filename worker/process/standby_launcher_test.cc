#include "worker/process/standby_launcher.h"

#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/process/fs_isolation.h"
#include "worker/process/posix_process_launcher.h"
#include "worker/testing/process_test_util.h"

namespace baton::worker {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

std::string EchoBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "baton",
                      "/worker/testing/standby_echo");
}

// standby_echo's report ("key=value" lines on stdout) of a finished process.
struct Outcome : ProcessOutcome {
  // Values of one key, in order.
  std::vector<std::string> Values(const std::string& key) const {
    std::vector<std::string> values;
    for (absl::string_view line : absl::StrSplit(out, '\n')) {
      if (absl::ConsumePrefix(&line, key + "=")) values.emplace_back(line);
    }
    return values;
  }
  std::string Value(const std::string& key) const {
    const std::vector<std::string> v = Values(key);
    return v.size() == 1 ? v[0] : "<" + std::to_string(v.size()) + " values>";
  }
};

// RunToExit, read as standby_echo's report.
Outcome RunEcho(LaunchedProcess& p) { return Outcome{RunToExit(p)}; }

// Forwards to a PosixProcessLauncher and counts the launches (standbys included).
class CountingLauncher final : public ProcessLauncher {
 public:
  absl::StatusOr<LaunchedProcess> Launch(const LaunchRequest& request) override {
    ++launches;
    return posix_.Launch(request);
  }
  std::atomic<int> launches{0};

 private:
  PosixProcessLauncher posix_;
};

class StandbyLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BecomeSubreaper();
    dir_ = MakeTestDir("standby");
    pid_dir_ = MakeTestDir("standby-pids");
    ASSERT_FALSE(dir_.empty());
    ASSERT_FALSE(pid_dir_.empty());
  }

  // The environment shared by standbys and requests (what does not vary per rank).
  std::vector<std::string> BaseEnv() const {
    return {"PATH=/usr/bin:/bin", "OMP_NUM_THREADS=1", "STANDBY_ECHO_PID_DIR=" + pid_dir_};
  }

  StandbyLauncherOptions Options(int standbys = 1) const {
    StandbyLauncherOptions o;
    o.trainer_path = EchoBinary();
    o.standbys = standbys;
    o.env = BaseEnv();
    o.refill_delay = absl::Seconds(5);
    o.backoff_initial = absl::Seconds(1);
    o.backoff_max = absl::Seconds(4);
    return o;
  }

  // A rank's launch of the "trainer", with per-rank variables on top of BaseEnv().
  LaunchRequest TrainerRequest(int rank, std::vector<std::string> args = {}) const {
    LaunchRequest r;
    r.argv = {EchoBinary()};
    r.argv.insert(r.argv.end(), args.begin(), args.end());
    r.env = BaseEnv();
    r.env.push_back(absl::StrCat("RANK=", rank));
    r.env.push_back("BATON_METRICS_FD=3");
    r.env.push_back("MASTER_ADDR=127.0.0.1");
    r.working_dir = dir_;
    r.builtin_trainer = true;
    return r;
  }

  // Pids of the standbys started so far (each creates <pid_dir_>/<pid> before waiting).
  std::set<pid_t> StandbyPids() const {
    std::set<pid_t> pids;
    DIR* d = ::opendir(pid_dir_.c_str());
    if (d == nullptr) return pids;
    while (struct dirent* e = ::readdir(d)) {
      int pid = 0;
      if (absl::SimpleAtoi(e->d_name, &pid)) pids.insert(pid);
    }
    ::closedir(d);
    return pids;
  }

  // Reconciles until `n` standbys have registered their pid files (they do so right after
  // starting; the pool counts them as soon as they are spawned).
  bool WaitForStandbyPids(size_t n) {
    return WaitUntil([&] { return StandbyPids().size() >= n; });
  }

  FakeClock clock_;
  CountingLauncher inner_;
  std::string dir_, pid_dir_;
};

TEST_F(StandbyLauncherTest, TrainerLaunchIsServedByAStandbyExactlyAsRequested) {
  StandbyLauncher launcher(Options(), &inner_, &clock_);
  launcher.ReconcileOnce();
  EXPECT_EQ(launcher.stats().ready, 1);
  ASSERT_TRUE(WaitForStandbyPids(1));
  const pid_t standby_pid = *StandbyPids().begin();

  const LaunchRequest request = TrainerRequest(3, {"--exit=7", "two words", ""});
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(request);
  ASSERT_OK(p);
  EXPECT_EQ(p->process->pid(), standby_pid);  // Started before Launch().
  EXPECT_FALSE(p->stdin_fd.valid());
  const Outcome o = RunEcho(*p);
  EXPECT_EQ(o.Value("mode"), "standby") << o.out << o.err;
  EXPECT_EQ(o.Value("pid"), absl::StrCat(standby_pid));
  EXPECT_THAT(o.Values("argv"), ElementsAreArray(request.argv));
  EXPECT_THAT(o.Values("env"), ElementsAreArray(request.env));
  EXPECT_EQ(o.Value("cwd"), dir_);
  EXPECT_EQ(o.Value("stdin"), "/dev/null");
  EXPECT_EQ(o.Value("fds"), "0 1 2 3");
  EXPECT_EQ(o.metrics, "{\"step\":1}\n");
  EXPECT_EQ(o.err, "");
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->exit_code(), 7);

  const StandbyStats stats = launcher.stats();
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.misses, 0);
  EXPECT_EQ(stats.ready, 0);
}

// A rank whose stdin is its rejoin socket (BATON_REJOIN_FD=0, pipe_stdin) is served by a
// standby, which keeps its own stdin socket for it; the worker's end comes back. A request
// for a stdin socket without that is not one a standby serves: cold.
TEST_F(StandbyLauncherTest, ARankWithARejoinSocketKeepsTheStandbysStdin) {
  StandbyLauncher launcher(Options(), &inner_, &clock_);
  launcher.ReconcileOnce();
  ASSERT_TRUE(WaitForStandbyPids(1));
  LaunchRequest request = TrainerRequest(0);
  request.pipe_stdin = true;
  request.env.push_back("BATON_REJOIN_FD=0");
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(request);
  ASSERT_OK(p);
  EXPECT_TRUE(p->stdin_fd.valid());
  Outcome o = RunEcho(*p);
  EXPECT_EQ(o.Value("mode"), "standby") << o.out << o.err;
  EXPECT_TRUE(absl::StartsWith(o.Value("stdin"), "socket:")) << o.Value("stdin");

  LaunchRequest plain = TrainerRequest(1);
  plain.pipe_stdin = true;
  p = launcher.Launch(plain);
  ASSERT_OK(p);
  o = RunEcho(*p);
  EXPECT_EQ(o.Value("mode"), "cold");
}

TEST_F(StandbyLauncherTest, StandbyAndColdLaunchReportTheSame) {
  StandbyLauncher launcher(Options(), &inner_, &clock_);
  launcher.ReconcileOnce();
  const LaunchRequest request = TrainerRequest(0, {"--exit=3"});
  absl::StatusOr<LaunchedProcess> warm = launcher.Launch(request);
  ASSERT_OK(warm);
  absl::StatusOr<LaunchedProcess> cold = launcher.Launch(request);  // The pool is empty now.
  ASSERT_OK(cold);
  const Outcome w = RunEcho(*warm);
  const Outcome c = RunEcho(*cold);
  EXPECT_EQ(w.Value("mode"), "standby");
  EXPECT_EQ(c.Value("mode"), "cold");
  for (const char* key : {"argv", "env", "cwd", "stdin", "fds"}) {
    EXPECT_EQ(w.Values(key), c.Values(key)) << key;
  }
  EXPECT_EQ(w.metrics, c.metrics);
  ASSERT_TRUE(w.exit.has_value() && c.exit.has_value());
  EXPECT_EQ(w.exit->exit_code(), 3);
  EXPECT_EQ(c.exit->exit_code(), 3);
  EXPECT_EQ(launcher.stats().hits, 1);
  EXPECT_EQ(launcher.stats().misses, 1);
}

TEST_F(StandbyLauncherTest, SignalsReachAStandbyStartedTrainer) {
  StandbyLauncher launcher(Options(), &inner_, &clock_);
  launcher.ReconcileOnce();
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(TrainerRequest(0, {"--wait"}));
  ASSERT_OK(p);
  EXPECT_EQ(launcher.stats().hits, 1);
  // Wait for the report, so the request has been applied.
  std::string out;
  ASSERT_TRUE(WaitUntil([&] {
    char buf[4096];
    const ssize_t n = ::read(p->stdout_fd.get(), buf, sizeof(buf));
    if (n > 0) out.append(buf, static_cast<size_t>(n));
    return absl::StrContains(out, "argv=--wait");
  }));
  ASSERT_OK(p->process->SignalGroup(SIGTERM));
  const Outcome o = RunEcho(*p);
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->signal(), SIGTERM);
}

TEST_F(StandbyLauncherTest, OtherProgramsAndAnEmptyPoolGoToTheInnerLauncher) {
  StandbyLauncherOptions options = Options();
  options.env.clear();  // No template yet: nothing starts before the first trainer launch.
  StandbyLauncher launcher(options, &inner_, &clock_);
  launcher.ReconcileOnce();
  EXPECT_EQ(launcher.stats().ready, 0);
  EXPECT_EQ(inner_.launches, 0);

  LaunchRequest sh;
  sh.argv = {"/bin/sh", "-c", "echo plain; exit 4"};
  sh.env = BaseEnv();
  sh.working_dir = dir_;
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(sh);
  ASSERT_OK(p);
  Outcome o = RunEcho(*p);
  EXPECT_EQ(o.out, "plain\n");
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->exit_code(), 4);
  EXPECT_EQ(launcher.stats().misses, 0);  // Not a trainer launch.

  p = launcher.Launch(TrainerRequest(0));
  ASSERT_OK(p);
  o = RunEcho(*p);
  EXPECT_EQ(o.Value("mode"), "cold");
  EXPECT_EQ(launcher.stats().misses, 1);

  // The trainer launch made its environment the template; the refill waits refill_delay.
  launcher.ReconcileOnce();
  EXPECT_EQ(launcher.stats().ready, 0);
  clock_.Advance(absl::Seconds(5));
  launcher.ReconcileOnce();
  EXPECT_EQ(launcher.stats().ready, 1);
  p = launcher.Launch(TrainerRequest(1));  // Another rank: only per-rank names differ.
  ASSERT_OK(p);
  o = RunEcho(*p);
  EXPECT_EQ(o.Value("mode"), "standby");
  EXPECT_THAT(o.Values("env"), ElementsAreArray(TrainerRequest(1).env));
  EXPECT_EQ(launcher.stats().hits, 1);
}

// A request the handoff cannot carry (a NUL byte in an argument) starts cold, and the
// standby taken for it goes back to the pool for the next rank.
TEST_F(StandbyLauncherTest, ARequestTheHandoffCannotCarryStartsColdAndKeepsTheStandby) {
  StandbyLauncher launcher(Options(), &inner_, &clock_);
  launcher.ReconcileOnce();
  ASSERT_EQ(launcher.stats().ready, 1);
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(TrainerRequest(0, {std::string("a\0b", 3)}));
  ASSERT_OK(p);
  EXPECT_EQ(RunEcho(*p).Value("mode"), "cold");
  EXPECT_EQ(launcher.stats().ready, 1);
  p = launcher.Launch(TrainerRequest(1));
  ASSERT_OK(p);
  EXPECT_EQ(RunEcho(*p).Value("mode"), "standby");
  EXPECT_EQ(launcher.stats().hits, 1);
}

TEST_F(StandbyLauncherTest, PoolRefillsAfterRefillDelay) {
  StandbyLauncher launcher(Options(2), &inner_, &clock_);
  launcher.ReconcileOnce();
  EXPECT_EQ(launcher.stats().ready, 2);
  EXPECT_EQ(inner_.launches, 2);
  launcher.ReconcileOnce();  // Full: nothing to do.
  EXPECT_EQ(inner_.launches, 2);

  std::vector<LaunchedProcess> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    absl::StatusOr<LaunchedProcess> p = launcher.Launch(TrainerRequest(rank, {"--wait"}));
    ASSERT_OK(p);
    ranks.push_back(*std::move(p));
  }
  EXPECT_EQ(launcher.stats().hits, 2);
  EXPECT_EQ(launcher.stats().ready, 0);
  EXPECT_EQ(inner_.launches, 2);

  clock_.Advance(absl::Seconds(4));
  launcher.ReconcileOnce();
  EXPECT_EQ(launcher.stats().ready, 0);  // Not yet: the new ranks have the CPU.
  clock_.Advance(absl::Seconds(1));
  launcher.ReconcileOnce();
  EXPECT_EQ(launcher.stats().ready, 2);
  EXPECT_EQ(inner_.launches, 4);
  for (LaunchedProcess& p : ranks) ASSERT_OK(p.process->SignalGroup(SIGKILL));
}

TEST_F(StandbyLauncherTest, MetricsShowReadyStandbysAndHowRanksStarted) {
  StandbyLauncher launcher(Options(1), &inner_, &clock_);
  StandbyMetrics metrics(&launcher);
  auto value = [&](const std::string& family, const std::string& start = "") {
    for (const prometheus::MetricFamily& f : metrics.Collect()) {
      if (f.name != family) continue;
      for (const prometheus::ClientMetric& m : f.metric) {
        if (!start.empty() && (m.label.empty() || m.label[0].value != start)) continue;
        return f.type == prometheus::MetricType::Counter ? m.counter.value : m.gauge.value;
      }
    }
    return -1.0;
  };
  EXPECT_EQ(value("baton_worker_standby_trainers", "loaded"), 0);
  launcher.ReconcileOnce();
  // Started, then loaded once it sent kStandbyLoaded.
  EXPECT_EQ(value("baton_worker_standby_trainers", "loaded") +
                value("baton_worker_standby_trainers", "loading"),
            1);
  ASSERT_TRUE(WaitUntil([&] { return value("baton_worker_standby_trainers", "loaded") == 1; }));
  EXPECT_EQ(value("baton_worker_standby_trainers", "loading"), 0);
  std::vector<LaunchedProcess> ranks;
  for (int rank = 0; rank < 2; ++rank) {  // The second finds the pool empty.
    absl::StatusOr<LaunchedProcess> p = launcher.Launch(TrainerRequest(rank, {"--wait"}));
    ASSERT_OK(p);
    ranks.push_back(*std::move(p));
  }
  EXPECT_EQ(value("baton_worker_standby_trainers", "loaded"), 0);
  EXPECT_EQ(value("baton_worker_trainer_launches_total", "standby"), 1);
  EXPECT_EQ(value("baton_worker_trainer_launches_total", "cold"), 1);
  EXPECT_EQ(value("baton_worker_standby_early_exits_total"), 0);
  for (LaunchedProcess& p : ranks) ASSERT_OK(p.process->SignalGroup(SIGKILL));
}

TEST_F(StandbyLauncherTest, ADifferentEnvironmentGetsAColdStartAndRetiresTheStandby) {
  StandbyLauncher launcher(Options(), &inner_, &clock_);
  launcher.ReconcileOnce();
  ASSERT_TRUE(WaitForStandbyPids(1));
  const pid_t old_standby = *StandbyPids().begin();

  LaunchRequest request = TrainerRequest(0);
  request.env.push_back("OPENBLAS_NUM_THREADS=2");  // Read at load time: must not match.
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(request);
  ASSERT_OK(p);
  const Outcome o = RunEcho(*p);
  EXPECT_EQ(o.Value("mode"), "cold");
  EXPECT_EQ(launcher.stats().misses, 1);
  EXPECT_EQ(launcher.stats().ready, 0);

  launcher.ReconcileOnce();  // Destroys the retired standby.
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(old_standby); }));
  clock_.Advance(absl::Seconds(5));
  launcher.ReconcileOnce();
  EXPECT_EQ(launcher.stats().ready, 1);
  request.env[3] = "RANK=1";
  p = launcher.Launch(request);
  ASSERT_OK(p);
  EXPECT_EQ(RunEcho(*p).Value("mode"), "standby");
}

TEST_F(StandbyLauncherTest, AStandbyStartedForOneJobNeverServesAnother) {
  StandbyLauncher launcher(Options(), &inner_, &clock_);
  LaunchRequest job_a = TrainerRequest(0);
  job_a.env.push_back("BATON_JOB_ID=j-000001");
  LaunchRequest job_b = TrainerRequest(0);
  job_b.env.push_back("BATON_JOB_ID=j-000002");

  // The worker's job-neutral standby serves the first job.
  launcher.ReconcileOnce();
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(job_a);
  ASSERT_OK(p);
  EXPECT_EQ(RunEcho(*p).Value("mode"), "standby");
  // Its replacement starts with job A's environment.
  clock_.Advance(absl::Seconds(5));
  launcher.ReconcileOnce();
  ASSERT_EQ(launcher.stats().ready, 1);
  ASSERT_TRUE(WaitForStandbyPids(2));

  // Job B's spec.env equals job A's, yet it gets a cold start, not job A's standby.
  p = launcher.Launch(job_b);
  ASSERT_OK(p);
  const Outcome o = RunEcho(*p);
  EXPECT_EQ(o.Value("mode"), "cold");
  EXPECT_THAT(o.Values("env"), ElementsAreArray(job_b.env));
  EXPECT_EQ(launcher.stats().ready, 0);  // Job A's standby was retired.
}

TEST_F(StandbyLauncherTest, AKilledStandbyIsNoticedAndReplacedAfterABackoff) {
  StandbyLauncher launcher(Options(), &inner_, &clock_);
  launcher.ReconcileOnce();
  ASSERT_TRUE(WaitForStandbyPids(1));
  const pid_t first = *StandbyPids().begin();
  ASSERT_EQ(::kill(first, SIGKILL), 0);

  ASSERT_TRUE(WaitUntil([&] {
    launcher.ReconcileOnce();
    return launcher.stats().early_exits == 1;
  }));
  EXPECT_EQ(launcher.stats().ready, 0);
  EXPECT_EQ(inner_.launches, 1);
  clock_.Advance(absl::Seconds(1));
  launcher.ReconcileOnce();
  EXPECT_EQ(launcher.stats().ready, 1);
  ASSERT_TRUE(WaitForStandbyPids(2));
  EXPECT_THAT(StandbyPids(), SizeIs(2));

  // A trainer launch still gets a standby.
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(TrainerRequest(0));
  ASSERT_OK(p);
  EXPECT_EQ(RunEcho(*p).Value("mode"), "standby");
}

TEST_F(StandbyLauncherTest, AStandbyThatDiedUnnoticedFallsBackToAColdStart) {
  StandbyLauncher launcher(Options(), &inner_, &clock_);
  launcher.ReconcileOnce();
  ASSERT_TRUE(WaitForStandbyPids(1));
  const pid_t standby = *StandbyPids().begin();
  ASSERT_EQ(::kill(standby, SIGKILL), 0);
  ASSERT_TRUE(WaitUntil([&] { return ProcessGone(standby); }));

  absl::StatusOr<LaunchedProcess> p = launcher.Launch(TrainerRequest(0, {"--exit=5"}));
  ASSERT_OK(p);
  EXPECT_NE(p->process->pid(), standby);
  const Outcome o = RunEcho(*p);
  EXPECT_EQ(o.Value("mode"), "cold");
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->exit_code(), 5);
  EXPECT_EQ(launcher.stats().hits, 0);
}

TEST_F(StandbyLauncherTest, ABrokenTrainerIsRetriedWithGrowingBackoffNotInALoop) {
  StandbyLauncherOptions options = Options();
  options.trainer_path = "/bin/false";  // Exits 1 at once, like a trainer without --standby.
  StandbyLauncher launcher(options, &inner_, &clock_);
  auto reconcile_until_early_exits = [&](int n) {
    return WaitUntil([&] {
      launcher.ReconcileOnce();
      return launcher.stats().early_exits == n;
    });
  };
  launcher.ReconcileOnce();
  EXPECT_EQ(inner_.launches, 1);
  ASSERT_TRUE(reconcile_until_early_exits(1));
  EXPECT_EQ(inner_.launches, 1);  // Backing off 1 s.
  clock_.Advance(absl::Seconds(1));
  launcher.ReconcileOnce();
  EXPECT_EQ(inner_.launches, 2);
  ASSERT_TRUE(reconcile_until_early_exits(2));
  clock_.Advance(absl::Seconds(1));  // Backing off 2 s now.
  launcher.ReconcileOnce();
  EXPECT_EQ(inner_.launches, 2);
  clock_.Advance(absl::Seconds(1));
  launcher.ReconcileOnce();
  EXPECT_EQ(inner_.launches, 3);
}

// Started, the launcher keeps its pool without being stepped: it reconciles when a standby
// exits, when a launch takes one, and when the refill or backoff time comes on the clock.
TEST_F(StandbyLauncherTest, ItsThreadRefillsAndReplacesStandbysOnEventsAndTheClock) {
  StandbyLauncher launcher(Options(), &inner_, &clock_);
  ASSERT_OK(launcher.Start());
  ASSERT_TRUE(WaitForStandbyPids(1));
  absl::StatusOr<LaunchedProcess> rank = launcher.Launch(TrainerRequest(0, {"--wait"}));
  ASSERT_OK(rank);
  EXPECT_EQ(launcher.stats().hits, 1);
  // The refill waits refill_delay (5 s) on the clock.
  ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + absl::Seconds(5)));
  EXPECT_EQ(inner_.launches, 1);
  clock_.Advance(absl::Seconds(5));
  ASSERT_TRUE(WaitForStandbyPids(2));
  ASSERT_TRUE(WaitUntil([&] { return launcher.stats().ready == 1; }));
  std::set<pid_t> pids = StandbyPids();
  pids.erase(rank->process->pid());
  ASSERT_THAT(pids, SizeIs(1));

  // A standby that dies is noticed, and replaced after the backoff (1 s) on the clock.
  ASSERT_EQ(::kill(*pids.begin(), SIGKILL), 0);
  ASSERT_TRUE(WaitUntil([&] { return launcher.stats().early_exits == 1; }));
  ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + absl::Seconds(1)));
  EXPECT_EQ(inner_.launches, 2);
  clock_.Advance(absl::Seconds(1));
  ASSERT_TRUE(WaitForStandbyPids(3));
  EXPECT_TRUE(WaitUntil([&] { return launcher.stats().ready == 1; }));
  ASSERT_OK(rank->process->SignalGroup(SIGKILL));
}

TEST_F(StandbyLauncherTest, DestructionLeavesNoProcessBehind) {
  std::set<pid_t> pids;
  {
    StandbyLauncher launcher(Options(3), &inner_, &clock_);
    ASSERT_OK(launcher.Start());  // The thread fills the pool.
    ASSERT_TRUE(WaitForStandbyPids(3));
    pids = StandbyPids();
    EXPECT_EQ(launcher.stats().ready, 3);
  }
  ASSERT_THAT(pids, SizeIs(3));
  for (pid_t pid : pids) EXPECT_TRUE(WaitUntil([&] { return ProcessGone(pid); })) << pid;
}

TEST_F(StandbyLauncherTest, ZeroStandbysIsAPlainPassThrough) {
  StandbyLauncher launcher(Options(0), &inner_, &clock_);
  ASSERT_OK(launcher.Start());
  launcher.ReconcileOnce();
  EXPECT_EQ(inner_.launches, 0);
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(TrainerRequest(0));
  ASSERT_OK(p);
  EXPECT_EQ(RunEcho(*p).Value("mode"), "cold");
  EXPECT_EQ(launcher.stats().misses, 0);
  EXPECT_THAT(StandbyPids(), IsEmpty());
}

// A command job that names the trainer's path (it is visible to any rank in `ps`) must not
// get an unconfined warm standby: it is fork/exec'd like any command.
TEST_F(StandbyLauncherTest, ACommandJobNamingTheTrainerIsNeverServedByAStandby) {
  StandbyLauncher launcher(Options(), &inner_, &clock_);
  launcher.ReconcileOnce();
  ASSERT_TRUE(WaitForStandbyPids(1));
  LaunchRequest command = TrainerRequest(0);
  command.builtin_trainer = false;
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(command);
  ASSERT_OK(p);
  const Outcome o = RunEcho(*p);
  EXPECT_EQ(o.Value("mode"), "cold") << o.out << o.err;
  EXPECT_EQ(launcher.stats().hits, 0);
}

// A warm rank is confined like a cold one: the standby applies the request's Landlock
// ruleset to itself, every thread of it (here one started before the handoff, as a
// library's pool is), before it reads the request.
TEST_F(StandbyLauncherTest, AStandbyServedRankIsConfinedLikeAColdOne) {
  if (absl::IsUnimplemented(BuildLandlockRuleset({{"/nonexistent"}, {}}).status())) {
    GTEST_SKIP() << "no Landlock in this kernel";
  }
  const std::string hidden = dir_ + "/hidden";
  std::filesystem::create_directories(hidden + "/other");
  std::filesystem::create_directories(hidden + "/mine");
  { std::ofstream(hidden + "/other/secret") << "secret"; }
  { std::ofstream(hidden + "/mine/own") << "own"; }
  StandbyLauncherOptions options = Options();
  options.env.push_back("STANDBY_ECHO_THREAD=1");
  StandbyLauncher launcher(options, &inner_, &clock_);
  launcher.ReconcileOnce();
  ASSERT_TRUE(WaitForStandbyPids(1));
  LaunchRequest request =
      TrainerRequest(0, {"--read=" + hidden + "/other/secret", "--read=" + hidden + "/mine/own"});
  request.env.push_back("STANDBY_ECHO_THREAD=1");
  request.isolation.hidden = {hidden};
  request.isolation.exceptions = {hidden + "/mine"};
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(request);
  ASSERT_OK(p);
  const Outcome o = RunEcho(*p);
  EXPECT_EQ(o.Value("mode"), "standby") << o.out << o.err;
  EXPECT_THAT(o.Values("read"),
              ElementsAre(hidden + "/other/secret:Permission denied", hidden + "/mine/own:ok"));
  EXPECT_THAT(o.Values("thread_read"),
              ElementsAre(hidden + "/other/secret:Permission denied", hidden + "/mine/own:ok"));
  EXPECT_EQ(launcher.stats().hits, 1);
}

// A standby loads under SCHED_IDLE, every thread of it: its start-up takes only the CPU
// time ranks leave idle. The rank it becomes runs under SCHED_OTHER in every thread, the
// one started before the handoff too, as a cold start would. Where the worker could not set
// a thread back (no CAP_SYS_NICE), standbys start under SCHED_OTHER.
TEST_F(StandbyLauncherTest, AStandbyLoadsUnderSchedIdleAndItsRankRunsAsAColdOne) {
  StandbyLauncherOptions options = Options();
  options.env.push_back("STANDBY_ECHO_THREAD=1");
  StandbyLauncher launcher(options, &inner_, &clock_);
  if (::geteuid() == 0) EXPECT_TRUE(launcher.standbys_idle());
  launcher.ReconcileOnce();
  ASSERT_TRUE(WaitForStandbyPids(1));
  const pid_t pid = *StandbyPids().begin();
  std::set<int> policies;
  for (const auto& task :
       std::filesystem::directory_iterator(absl::StrCat("/proc/", pid, "/task"))) {
    int tid = 0;
    ASSERT_TRUE(absl::SimpleAtoi(task.path().filename().string(), &tid));
    policies.insert(::sched_getscheduler(tid));
  }
  // The helper thread's too.
  EXPECT_THAT(policies, ElementsAre(launcher.standbys_idle() ? SCHED_IDLE : SCHED_OTHER));

  LaunchRequest request = TrainerRequest(0);
  request.env.push_back("STANDBY_ECHO_THREAD=1");
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(request);
  ASSERT_OK(p);
  EXPECT_EQ(p->process->pid(), pid);
  const Outcome o = RunEcho(*p);
  EXPECT_EQ(o.Value("mode"), "standby") << o.out << o.err;
  EXPECT_EQ(o.Value("sched"), absl::StrCat(SCHED_OTHER));
  EXPECT_EQ(o.Value("thread_sched"), absl::StrCat(SCHED_OTHER));
}

}  // namespace
}  // namespace baton::worker
