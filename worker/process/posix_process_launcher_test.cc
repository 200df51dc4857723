#include "worker/process/posix_process_launcher.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/testing/process_test_util.h"

namespace baton::worker {
namespace {

using ::testing::HasSubstr;

// The first line the process prints on stdout.
std::string ReadLine(LaunchedProcess& p, absl::Duration timeout = absl::Seconds(20)) {
  std::string line;
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    struct pollfd pfd = {p.stdout_fd.get(), POLLIN, 0};
    ::poll(&pfd, 1, 100);
    char c;
    while (::read(p.stdout_fd.get(), &c, 1) == 1) {
      if (c == '\n') return line;
      line.push_back(c);
    }
  }
  return line;
}

pid_t ParsePid(const std::string& s) {
  int pid = 0;
  return absl::SimpleAtoi(absl::StripAsciiWhitespace(s), &pid) ? pid : -1;
}

class PosixProcessLauncherTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BecomeSubreaper();
    dir_ = MakeTestDir("launcher");
    ASSERT_FALSE(dir_.empty());
  }
  LaunchRequest Sh(const std::string& script, std::vector<std::string> extra_env = {}) {
    LaunchRequest r;
    r.argv = {"/bin/sh", "-c", script};
    r.env = {"PATH=/usr/bin:/bin", "BATON_METRICS_FD=3"};
    r.env.insert(r.env.end(), extra_env.begin(), extra_env.end());
    r.working_dir = dir_;
    return r;
  }
  PosixProcessLauncher launcher_;
  std::string dir_;
};

TEST_F(PosixProcessLauncherTest, RelaysOutputMetricsEnvironmentAndExitCode) {
  absl::StatusOr<LaunchedProcess> p = launcher_.Launch(
      Sh(R"(echo out; echo err >&2; echo '{"step":1}' >&$BATON_METRICS_FD; echo "$FOO"; exit 7)",
         {"FOO=bar"}));
  ASSERT_OK(p);
  EXPECT_GT(p->process->pid(), 0);
  EXPECT_FALSE(p->stdin_fd.valid());
  const ProcessOutcome o = RunToExit(*p);
  EXPECT_EQ(o.out, "out\nbar\n");
  EXPECT_EQ(o.err, "err\n");
  EXPECT_EQ(o.metrics, "{\"step\":1}\n");
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->exit_code(), 7);
  EXPECT_EQ(o.exit->signal(), 0);
  EXPECT_FALSE(p->process->TryCollectExit().has_value());  // Only once.
}

TEST_F(PosixProcessLauncherTest, ChildGetsWorkingDirNullStdinAndNoOtherFds) {
  absl::StatusOr<LaunchedProcess> p = launcher_.Launch(
      Sh("pwd; readlink /proc/$$/fd/0; "
         "for n in $(seq 0 64); do [ -e /proc/$$/fd/$n ] && printf '%s ' $n; done; true"));
  ASSERT_OK(p);
  const ProcessOutcome o = RunToExit(*p);
  EXPECT_EQ(o.out, dir_ + "\n/dev/null\n0 1 2 3 ");
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->exit_code(), 0);
}

TEST_F(PosixProcessLauncherTest, PipeStdinDeliversWhatIsWrittenThenEof) {
  LaunchRequest r = Sh("cat; echo done; readlink /proc/$$/fd/0 | cut -d: -f1");
  r.pipe_stdin = true;
  absl::StatusOr<LaunchedProcess> p = launcher_.Launch(r);
  ASSERT_OK(p);
  ASSERT_TRUE(p->stdin_fd.valid());
  const std::string input = "hello\n";
  ASSERT_OK(WriteAll(p->stdin_fd.get(), input.data(), input.size()));
  p->stdin_fd.Reset();  // EOF for cat.
  const ProcessOutcome o = RunToExit(*p);
  EXPECT_EQ(o.out, "hello\ndone\nsocket\n");
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->exit_code(), 0);
}

TEST_F(PosixProcessLauncherTest, WritingToTheStdinOfAnExitedChildFailsWithEpipe) {
  LaunchRequest r = Sh("exit 0");
  r.pipe_stdin = true;
  absl::StatusOr<LaunchedProcess> p = launcher_.Launch(r);
  ASSERT_OK(p);
  const ProcessOutcome o = RunToExit(*p);
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(::send(p->stdin_fd.get(), "x", 1, MSG_NOSIGNAL), -1);
  EXPECT_EQ(errno, EPIPE);
}

TEST_F(PosixProcessLauncherTest, LooksUpArgv0OnTheChildsPath) {
  LaunchRequest r = Sh("");
  r.argv = {"sh", "-c", "exit 3"};
  r.env = {"PATH=/nonexistent:/bin:/usr/bin"};
  absl::StatusOr<LaunchedProcess> p = launcher_.Launch(r);
  ASSERT_OK(p);
  const ProcessOutcome o = RunToExit(*p);
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->exit_code(), 3);
}

// A program that cannot be run is a Launch error naming the reason; nothing runs.
TEST_F(PosixProcessLauncherTest, UnknownCommandIsALaunchError) {
  LaunchRequest r = Sh("");
  r.argv = {"baton-no-such-program"};
  EXPECT_THAT(launcher_.Launch(r),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("baton-no-such-program: command not found")));
}

TEST_F(PosixProcessLauncherTest, MissingProgramIsALaunchErrorWithTheOsReason) {
  LaunchRequest r = Sh("");
  r.argv = {dir_ + "/missing-program"};
  EXPECT_THAT(launcher_.Launch(r),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot execute " + r.argv[0] + ": No such file or directory")));
}

TEST_F(PosixProcessLauncherTest, NonExecutableFileIsALaunchError) {
  const std::string path = dir_ + "/not-executable";
  std::ofstream(path) << "#!/bin/sh\n";
  ::chmod(path.c_str(), 0644);
  LaunchRequest r = Sh("");
  r.argv = {path};
  EXPECT_THAT(launcher_.Launch(r),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot execute " + path + ": Permission denied")));
}

TEST_F(PosixProcessLauncherTest, MissingWorkingDirIsALaunchError) {
  LaunchRequest r = Sh("true");
  r.working_dir = dir_ + "/missing";
  EXPECT_THAT(launcher_.Launch(r),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot change directory to " + r.working_dir +
                                 ": No such file or directory")));
}

TEST_F(PosixProcessLauncherTest, EmptyArgvIsRejected) {
  LaunchRequest r = Sh("");
  r.argv.clear();
  EXPECT_THAT(launcher_.Launch(r), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("argv")));
}

TEST_F(PosixProcessLauncherTest, SignalGroupDeliversSigterm) {
  absl::StatusOr<LaunchedProcess> p = launcher_.Launch(Sh("echo ready; exec sleep 1000"));
  ASSERT_OK(p);
  ASSERT_EQ(ReadLine(*p), "ready");
  EXPECT_THAT(p->process->SignalGroup(SIGINT),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unsupported")));
  ASSERT_OK(p->process->SignalGroup(SIGTERM));
  const ProcessOutcome o = RunToExit(*p);
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->exit_code(), -1);
  EXPECT_EQ(o.exit->signal(), SIGTERM);
  EXPECT_TRUE(ProcessGone(p->process->pid()));
  ASSERT_OK(p->process->SignalGroup(SIGKILL));  // After the exit: a no-op.
}

TEST_F(PosixProcessLauncherTest, SigtermRightAfterLaunchIsNotLost) {
  // The signal may reach the child before it reset the shim's SIG_IGN; it must stay
  // pending instead of being discarded. Many tries make the early window likely.
  for (int i = 0; i < 20; ++i) {
    absl::StatusOr<LaunchedProcess> p = launcher_.Launch(Sh("exec sleep 1000"));
    ASSERT_OK(p);
    ASSERT_OK(p->process->SignalGroup(SIGTERM));
    const ProcessOutcome o = RunToExit(*p, absl::Seconds(10));
    ASSERT_TRUE(o.exit.has_value()) << "try " << i << ": SIGTERM was lost";
    EXPECT_EQ(o.exit->signal(), SIGTERM) << "try " << i;
  }
}

TEST_F(PosixProcessLauncherTest, GroupLeftoversAreKilledWhenTheLeaderExits) {
  absl::StatusOr<LaunchedProcess> p = launcher_.Launch(Sh("sleep 1000 & echo $!; exit 0"));
  ASSERT_OK(p);
  const pid_t grandchild = ParsePid(ReadLine(*p));
  ASSERT_GT(grandchild, 0);
  const ProcessOutcome o = RunToExit(*p);
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->exit_code(), 0);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(grandchild); }));
}

TEST_F(PosixProcessLauncherTest, LosingTheControlSocketKillsTheWholeGroup) {
  // Dropping the Process closes the worker's end of the control socket, exactly what the
  // kernel does when the worker dies (worker_e2e_test covers a real SIGKILL).
  absl::StatusOr<LaunchedProcess> p =
      launcher_.Launch(Sh("trap '' TERM; sleep 1000 & echo $!; wait"));
  ASSERT_OK(p);
  const pid_t leader = p->process->pid();
  const pid_t grandchild = ParsePid(ReadLine(*p));
  ASSERT_GT(grandchild, 0);
  EXPECT_EQ(::kill(leader, 0), 0);
  EXPECT_EQ(::kill(grandchild, 0), 0);
  p->process.reset();
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(leader) && ProcessGone(grandchild); }));
}

// True once no process `pid` exists, zombies included; reaps nothing itself.
bool NoSuchProcess(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

TEST_F(PosixProcessLauncherTest, DoubleForkedSetsidDaemonIsKilledAndReapedWhenTheRankExits) {
  // The daemon leaves the training process's group and session, and its parent exits at
  // once: only the shim, a subreaper, can still find it.
  absl::StatusOr<LaunchedProcess> p = launcher_.Launch(
      Sh("setsid sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 3>&- & echo $!'; exit 0"));
  ASSERT_OK(p);
  const pid_t daemon = ParsePid(ReadLine(*p));
  ASSERT_GT(daemon, 0);
  const ProcessOutcome o = RunToExit(*p);
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->exit_code(), 0);
  // Killed and reaped by the shim before it reported the exit: no process, no zombie.
  EXPECT_TRUE(NoSuchProcess(daemon));
}

TEST_F(PosixProcessLauncherTest, EscapedDaemonIsKilledWhenTheRankIsStopped) {
  absl::StatusOr<LaunchedProcess> p = launcher_.Launch(Sh(
      "setsid sh -c 'trap \"\" TERM; sleep 1000 </dev/null >/dev/null 2>&1 3>&- & echo $!'; "
      "exec sleep 1000"));
  ASSERT_OK(p);
  const pid_t daemon = ParsePid(ReadLine(*p));
  ASSERT_GT(daemon, 0);
  ASSERT_OK(p->process->SignalGroup(SIGTERM));
  const ProcessOutcome o = RunToExit(*p);
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->signal(), SIGTERM);
  EXPECT_TRUE(NoSuchProcess(daemon));
}

TEST_F(PosixProcessLauncherTest, OrphansThatExitWhileTheRankRunsAreReaped) {
  absl::StatusOr<LaunchedProcess> launched = launcher_.Launch(
      Sh("setsid sh -c 'sh -c \"echo \\$\\$; exit 0\" &'; exec sleep 1000"));
  ASSERT_OK(launched);
  const pid_t orphan = ParsePid(ReadLine(*launched));
  ASSERT_GT(orphan, 0);
  // It exited at once; without a reaper it would stay a zombie of the shim (or of this
  // test, a subreaper too) for as long as the rank runs.
  EXPECT_TRUE(WaitUntil([&] { return NoSuchProcess(orphan); }));
  ASSERT_OK(launched->process->SignalGroup(SIGKILL));
  EXPECT_TRUE(RunToExit(*launched).exit.has_value());
}

TEST_F(PosixProcessLauncherTest, AConfinedProcessCannotTouchTheHiddenTreesButItsOwnParts) {
  if (absl::IsUnimplemented(BuildLandlockRuleset({{"/nonexistent"}, {}}).status())) {
    GTEST_SKIP() << "no Landlock in this kernel";
  }
  const std::string hidden = dir_ + "/jobs";
  std::filesystem::create_directories(hidden + "/other");
  std::filesystem::create_directories(hidden + "/mine");
  std::filesystem::create_directories(dir_ + "/free");  // Outside the hidden tree.
  { std::ofstream(hidden + "/other/secret") << "secret\n"; }
  LaunchRequest r = Sh(
      "cat jobs/other/secret; echo read=$?; echo x > jobs/other/planted; echo write=$?; "
      "rm -f jobs/other/secret; echo rm=$?; ls jobs/other >/dev/null; echo list=$?; "
      "echo mine > jobs/mine/f && cat jobs/mine/f; echo own=$?; "
      "echo x > free/f && rm free/f; echo outside=$?");
  r.isolation.hidden = {hidden};
  r.isolation.exceptions = {hidden + "/mine"};
  absl::StatusOr<LaunchedProcess> p = launcher_.Launch(r);
  ASSERT_OK(p);
  const ProcessOutcome o = RunToExit(*p);
  EXPECT_THAT(o.out, ::testing::AllOf(HasSubstr("read=1"), HasSubstr("write=2"),
                                      HasSubstr("rm=1"), HasSubstr("list=2"),
                                      HasSubstr("mine\nown=0"), HasSubstr("outside=0")))
      << o.err;
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("secret")));
  EXPECT_EQ(ReadFileOrEmpty(hidden + "/other/secret"), "secret\n");
  EXPECT_FALSE(std::filesystem::exists(hidden + "/other/planted"));
}

// The worker's credentials are single files in a directory ranks may otherwise use (the
// quickstart keeps every PKI file in one): those files are hidden, their neighbours not.
TEST_F(PosixProcessLauncherTest, AHiddenFileIsHiddenButItsNeighboursAreNot) {
  if (absl::IsUnimplemented(BuildLandlockRuleset({{"/nonexistent"}, {}}).status())) {
    GTEST_SKIP() << "no Landlock in this kernel";
  }
  std::filesystem::create_directories(dir_ + "/pki");
  { std::ofstream(dir_ + "/pki/w1.key") << "PRIVATE KEY\n"; }
  { std::ofstream(dir_ + "/pki/config.yaml") << "public\n"; }
  LaunchRequest r = Sh(
      "cat pki/w1.key; echo read=$?; rm -f pki/w1.key; echo rm=$?; cat pki/config.yaml; "
      "echo neighbour=$?");
  r.isolation.hidden = {dir_ + "/pki/w1.key"};
  absl::StatusOr<LaunchedProcess> p = launcher_.Launch(r);
  ASSERT_OK(p);
  const ProcessOutcome o = RunToExit(*p);
  EXPECT_THAT(o.out, ::testing::AllOf(HasSubstr("read=1"), HasSubstr("rm=1"),
                                      HasSubstr("public\nneighbour=0")))
      << o.err;
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("PRIVATE KEY")));
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/pki/w1.key"), "PRIVATE KEY\n");
}

// Fencing: the worker hangs (the test neither collects, signals nor drops the process, as a
// SIGSTOPped daemon would not), the lease runs out, and the shim alone kills the rank's
// whole tree: its group and a daemon that left it.
TEST_F(PosixProcessLauncherTest, TheShimKillsTheRankTreeOnceTheLeaseRunsOutUnrenewed) {
  absl::StatusOr<std::unique_ptr<LeaseFence>> fence = LeaseFence::Create();
  ASSERT_OK(fence);
  PosixProcessLauncher launcher(nullptr, fence->get());
  launcher.SetLeaseRemaining(absl::Hours(1));
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(
      Sh("trap '' TERM; setsid sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 3>&- 4>&- & "
         "echo $!'; sleep 1000 & echo $!; wait"));
  ASSERT_OK(p);
  const pid_t leader = p->process->pid();
  const pid_t daemon = ParsePid(ReadLine(*p));
  const pid_t member = ParsePid(ReadLine(*p));
  ASSERT_GT(daemon, 0);
  ASSERT_GT(member, 0);
  EXPECT_EQ(::kill(leader, 0), 0);

  // Moved earlier, as a lease replaced by a shorter one: the shim looks again within 1 s.
  launcher.SetLeaseRemaining(absl::Seconds(-1));
  EXPECT_TRUE(WaitUntil([&] {
    return NoSuchProcess(leader) && NoSuchProcess(member) && NoSuchProcess(daemon);
  }));
  const ProcessOutcome o = RunToExit(*p);
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->signal(), SIGKILL);
}

TEST_F(PosixProcessLauncherTest, ARankStartedWithoutALeaseToLoseRunsOn) {
  absl::StatusOr<std::unique_ptr<LeaseFence>> fence = LeaseFence::Create();
  ASSERT_OK(fence);
  PosixProcessLauncher launcher(nullptr, fence->get());
  launcher.SetLeaseRemaining(absl::InfiniteDuration());
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(
      Sh("echo \"fd=$BATON_LEASE_FD $(readlink /proc/$$/fd/4)\"; exec sleep 1000"));
  ASSERT_OK(p);
  EXPECT_THAT(ReadLine(*p), ::testing::StartsWith("fd=4 /memfd:baton-lease"));
  // Still running when stopped: the exit is the SIGTERM, not the fence's SIGKILL.
  ASSERT_OK(p->process->SignalGroup(SIGTERM));
  const ProcessOutcome o = RunToExit(*p);
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->signal(), SIGTERM);
}

TEST_F(PosixProcessLauncherTest, ARankOfAnUnfencedLauncherGetsNoLeasePage) {
  absl::StatusOr<LaunchedProcess> p =
      launcher_.Launch(Sh("echo \"fd=${BATON_LEASE_FD:-unset}\"; ls /proc/$$/fd; exit 0"));
  ASSERT_OK(p);
  const ProcessOutcome o = RunToExit(*p);
  EXPECT_THAT(o.out, HasSubstr("fd=unset"));
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("\n4\n")));
}

// A rank that double-forks a daemon into a new session and then SIGKILLs its own shim
// leaves nobody to kill the daemon but the worker: launched by `launcher`, the rank is
// reported killed and neither it nor the daemon is left.
void ExpectNothingOutlivesARankThatKillsItsShim(PosixProcessLauncher& launcher,
                                                const LaunchRequest& request) {
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(request);
  ASSERT_OK(p);
  const pid_t leader = p->process->pid();
  const pid_t daemon = ParsePid(ReadLine(*p));
  ASSERT_GT(daemon, 0);
  const ProcessOutcome o = RunToExit(*p);
  ASSERT_TRUE(o.exit.has_value());
  EXPECT_EQ(o.exit->signal(), SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(leader) && ProcessGone(daemon); }));
}

constexpr char kKillsItsShim[] =
    "setsid sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 3>&- & echo $!'; "
    "kill -9 $PPID; exec sleep 1000";

// With a cgroup per rank, the cgroup is killed whole.
TEST_F(PosixProcessLauncherTest, NothingOutlivesARankThatKillsItsShimWithCgroups) {
  absl::StatusOr<std::unique_ptr<RankCgroups>> cgroups = RankCgroups::Create();
  if (!cgroups.ok()) GTEST_SKIP() << "no writable cgroup v2 here: " << cgroups.status();
  PosixProcessLauncher launcher(nullptr, nullptr, cgroups->get());
  ExpectNothingOutlivesARankThatKillsItsShim(launcher, Sh(kKillsItsShim));
}

// The fallback without cgroups: the daemon was reparented to the worker (a subreaper), which
// kills every child it did not fork itself when a shim dies.
TEST_F(PosixProcessLauncherTest, NothingOutlivesARankThatKillsItsShimWithoutCgroups) {
  ChildRegistry registry;
  PosixProcessLauncher launcher(&registry);
  ExpectNothingOutlivesARankThatKillsItsShim(launcher, Sh(kKillsItsShim));
}

// A worker killed without cleaning up (SIGKILL) leaves empty cgroups behind; the next one to
// start removes them, and touches no cgroup in use.
TEST_F(PosixProcessLauncherTest, StaleRankCgroupsAreRemovedAndLiveOnesKept) {
  absl::StatusOr<std::unique_ptr<RankCgroups>> live = RankCgroups::Create();
  if (!live.ok()) GTEST_SKIP() << "no writable cgroup v2 here: " << live.status();
  const std::string stale = (*live)->own_dir() + "/baton-ranks-999999-deadbeef";
  ASSERT_EQ(::mkdir(stale.c_str(), 0700), 0);
  ASSERT_EQ(::mkdir((stale + "/r1").c_str(), 0700), 0);
  PosixProcessLauncher launcher(nullptr, nullptr, live->get());
  absl::StatusOr<LaunchedProcess> running = launcher.Launch(Sh("exec sleep 1000"));
  ASSERT_OK(running);

  absl::StatusOr<std::unique_ptr<RankCgroups>> next = RankCgroups::Create();
  ASSERT_OK(next);
  EXPECT_FALSE(std::filesystem::exists(stale));
  // The running rank's cgroup, and so its worker's directory, stay in use.
  EXPECT_TRUE(std::filesystem::exists((*live)->ranks_dir()));
  absl::StatusOr<LaunchedProcess> another = launcher.Launch(Sh("exit 0"));
  ASSERT_OK(another);
  EXPECT_TRUE(RunToExit(*another).exit.has_value());
  ASSERT_OK(running->process->SignalGroup(SIGKILL));
  EXPECT_TRUE(RunToExit(*running).exit.has_value());
}

// A worker starting next to a live one (tests run side by side; pods share a node's
// cgroup) leaves the live one's empty directory, and the empty cgroup it just made for a
// rank about to move in, alone: both are held locked. (The sweep once removed every empty
// one, so a rank's launch failed with "cannot move the process into its cgroup".)
TEST_F(PosixProcessLauncherTest, AStartingWorkerLeavesALiveWorkersEmptyCgroupsAlone) {
  absl::StatusOr<std::unique_ptr<RankCgroups>> live = RankCgroups::Create();
  if (!live.ok()) GTEST_SKIP() << "no writable cgroup v2 here: " << live.status();
  absl::StatusOr<std::string> rank = (*live)->NewRankCgroup();
  ASSERT_OK(rank);

  absl::StatusOr<std::unique_ptr<RankCgroups>> next = RankCgroups::Create();
  ASSERT_OK(next);
  EXPECT_TRUE(std::filesystem::exists((*live)->ranks_dir()));
  EXPECT_TRUE(std::filesystem::exists(*rank));
  EXPECT_TRUE(RankCgroups::KillAndRemove(*rank));

  // Once its worker is gone, the directory is stale and the next worker removes it.
  const std::string gone = (*next)->ranks_dir();
  absl::StatusOr<std::string> left = (*next)->NewRankCgroup();
  ASSERT_OK(left);
  next->reset();
  ASSERT_TRUE(std::filesystem::exists(*left));
  absl::StatusOr<std::unique_ptr<RankCgroups>> third = RankCgroups::Create();
  ASSERT_OK(third);
  EXPECT_FALSE(std::filesystem::exists(gone));
}

// A rank cannot leave its cgroup (it starts in it): the worker's cgroup directory is
// hidden from it.
TEST_F(PosixProcessLauncherTest, AConfinedRankCannotMoveItselfOutOfItsCgroup) {
  absl::StatusOr<std::unique_ptr<RankCgroups>> cgroups = RankCgroups::Create();
  if (!cgroups.ok()) GTEST_SKIP() << "no writable cgroup v2 here: " << cgroups.status();
  if (absl::IsUnimplemented(BuildLandlockRuleset({{"/nonexistent"}, {}}).status())) {
    GTEST_SKIP() << "no Landlock in this kernel";
  }
  PosixProcessLauncher launcher(nullptr, nullptr, cgroups->get());
  LaunchRequest r = Sh(absl::StrCat("echo $$ > ", (*cgroups)->own_dir(),
                                    "/cgroup.procs; echo moved=$?; cat /proc/self/cgroup"));
  r.isolation.hidden = {(*cgroups)->own_dir()};
  absl::StatusOr<LaunchedProcess> p = launcher.Launch(r);
  ASSERT_OK(p);
  const ProcessOutcome o = RunToExit(*p);
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("moved=0")));
  EXPECT_THAT(o.out, HasSubstr("0::/baton-ranks-"));
}

}  // namespace
}  // namespace baton::worker
