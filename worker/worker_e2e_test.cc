// End-to-end: the real baton-worker binary against an in-process fake coordinator.

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/testing/fake_coordinator.h"
#include "worker/testing/process_test_util.h"

extern char** environ;

namespace baton::worker {
namespace {

using baton::v1::CoordinatorMessage;
using baton::v1::WorkerMessage;

std::string WorkerBinary() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  const char* workspace = std::getenv("TEST_WORKSPACE");
  return absl::StrCat(srcdir ? srcdir : ".", "/", workspace ? workspace : "baton",
                      "/worker/baton-worker");
}

CoordinatorMessage StartCommand(const std::string& job_id, int ranks, const std::string& script) {
  CoordinatorMessage m;
  baton::v1::StartAssignment* a = m.mutable_start_assignment();
  a->set_job_id(job_id);
  a->set_generation(1);
  a->set_world_size(ranks);
  a->set_master_addr("127.0.0.1");
  a->set_master_port(29500);
  for (const char* arg : {"/bin/sh", "-c"}) a->mutable_spec()->mutable_command()->add_argv(arg);
  a->mutable_spec()->mutable_command()->add_argv(script);
  for (int r = 0; r < ranks; ++r) {
    baton::v1::RankInfo* info = a->add_ranks();
    info->set_rank(r);
    info->set_local_rank(r);
    info->set_local_world_size(ranks);
  }
  return m;
}

class WorkerE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BecomeSubreaper();
    work_dir_ = MakeTestDir("worker-e2e");
    coordinator_.set_heartbeat_interval(absl::Milliseconds(100));
  }
  void TearDown() override {
    if (worker_pid_ > 0) {
      ::kill(worker_pid_, SIGKILL);
      ::waitpid(worker_pid_, nullptr, 0);
    }
  }

  void StartWorker(std::vector<std::string> extra_args = {}) {
    const std::string binary = WorkerBinary();
    std::vector<std::string> args = {
        binary,
        "--coordinator=" + coordinator_.address(),
        "--insecure",
        "--work_dir=" + work_dir_,
        "--heartbeat_interval=100ms",
        "--stop_grace=5s",
        "--metrics_listen=",  // No exporter: never bind the default port in tests.
    };
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    ASSERT_EQ(::posix_spawn(&worker_pid_, binary.c_str(), nullptr, nullptr, argv.data(), environ),
              0)
        << binary;
  }

  // Exit status of the worker once it exited, waiting up to 30 s; -1 if it did not.
  int WaitWorkerExit() {
    int status = -1;
    WaitUntil([&] { return ::waitpid(worker_pid_, &status, WNOHANG) == worker_pid_; },
              absl::Seconds(30));
    worker_pid_ = -1;
    return status;
  }

  // Collects "<prefix><number>" log lines of `job_id` until one per rank in `ranks` arrived.
  std::map<int, int> WaitForNumbers(const std::string& job_id, const std::string& prefix,
                                    int ranks) {
    std::map<int, int> numbers;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (static_cast<int>(numbers.size()) < ranks && absl::Now() < deadline) {
      std::optional<WorkerMessage> logs =
          coordinator_.Next(WorkerMessage::kLogs, deadline - absl::Now());
      if (!logs.has_value() || logs->logs().job_id() != job_id) continue;
      for (const auto& line : logs->logs().lines()) {
        int n = 0;
        if (absl::StartsWith(line.text(), prefix) &&
            absl::SimpleAtoi(absl::StripPrefix(line.text(), prefix), &n)) {
          numbers[line.rank()] = n;
        }
      }
    }
    return numbers;
  }

  // The text of `job_id`'s log lines until one equals `last` (included) or 20 s passed.
  std::string LinesUntil(const std::string& job_id, const std::string& last) {
    std::string text;
    const absl::Time deadline = absl::Now() + absl::Seconds(20);
    while (absl::Now() < deadline) {
      std::optional<WorkerMessage> logs =
          coordinator_.Next(WorkerMessage::kLogs, deadline - absl::Now());
      if (!logs.has_value() || logs->logs().job_id() != job_id) continue;
      for (const auto& line : logs->logs().lines()) {
        absl::StrAppend(&text, line.text(), "\n");
        if (line.text() == last) return text;
      }
    }
    return text;
  }

  // The AssignmentFailed the worker sends for `job_id`, if it sends one within 10 s.
  std::optional<baton::v1::AssignmentFailed> FailureOf(const std::string& job_id) {
    std::optional<WorkerMessage> m = coordinator_.Next([&](const WorkerMessage& m) {
      return m.has_assignment_failed() && m.assignment_failed().job_id() == job_id;
    });
    if (!m.has_value()) return std::nullopt;
    return m->assignment_failed();
  }

  FakeCoordinator coordinator_;
  std::string work_dir_;
  pid_t worker_pid_ = -1;
};

TEST_F(WorkerE2eTest, SigkillOfTheWorkerLeavesNoTrainingProcessOrGrandchild) {
  StartWorker();
  std::optional<WorkerMessage> reg = coordinator_.Next(WorkerMessage::kRegister);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->register_().worker_id(),
            absl::StripAsciiWhitespace(ReadFileOrEmpty(work_dir_ + "/worker_id")));
  EXPECT_GE(reg->register_().resources().slots(), 1);

  // Each rank: a shell (the process group leader) with a background grandchild.
  ASSERT_TRUE(WaitUntil([&] {
    return coordinator_.Send(
        StartCommand("j-orphans", 2, "sleep 1000 & echo \"grandchild $!\"; wait"));
  }));
  std::optional<WorkerMessage> started = coordinator_.Next(WorkerMessage::kAssignmentStarted);
  ASSERT_TRUE(started.has_value());
  std::set<int> pids;
  for (const auto& r : started->assignment_started().ranks()) pids.insert(r.pid());
  const std::map<int, int> grandchildren = WaitForNumbers("j-orphans", "grandchild ", 2);
  ASSERT_EQ(grandchildren.size(), 2u);
  for (const auto& [rank, pid] : grandchildren) pids.insert(pid);
  ASSERT_EQ(pids.size(), 4u);
  for (int pid : pids) ASSERT_EQ(::kill(pid, 0), 0) << pid;

  ASSERT_EQ(::kill(worker_pid_, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(worker_pid_, &status, 0), worker_pid_);
  worker_pid_ = -1;
  EXPECT_TRUE(WIFSIGNALED(status));

  for (int pid : pids) {
    if (!WaitUntil([&] { return ProcessGone(pid); })) {
      ADD_FAILURE() << "pid " << pid << " survived the worker";
      ::kill(pid, SIGKILL);  // Do not leak it past the test.
    }
  }
}

TEST_F(WorkerE2eTest, SigtermDrainsUntilTheCoordinatorStopsTheRanksAndRestartKeepsIdentity) {
  StartWorker();
  std::optional<WorkerMessage> reg = coordinator_.Next(WorkerMessage::kRegister);
  ASSERT_TRUE(reg.has_value());
  const std::string worker_id = reg->register_().worker_id();

  ASSERT_TRUE(WaitUntil(
      [&] { return coordinator_.Send(StartCommand("j-term", 1, "echo ready; exec sleep 1000")); }));
  std::optional<WorkerMessage> started = coordinator_.Next(WorkerMessage::kAssignmentStarted);
  ASSERT_TRUE(started.has_value());
  const int pid = started->assignment_started().ranks(0).pid();
  ASSERT_TRUE(coordinator_
                  .Next([](const WorkerMessage& m) {
                    return m.has_logs() && m.logs().lines_size() > 0 &&
                           m.logs().lines(0).text() == "ready";
                  })
                  .has_value());

  // SIGTERM drains: the worker tells the coordinator and keeps its rank running until the
  // coordinator moves the job (here: stops it), then exits once the exit was reported.
  ASSERT_EQ(::kill(worker_pid_, SIGTERM), 0);
  std::optional<WorkerMessage> draining = coordinator_.Next(WorkerMessage::kDraining);
  ASSERT_TRUE(draining.has_value());
  EXPECT_EQ(draining->draining().reason(), "received SIGTERM");
  EXPECT_FALSE(ProcessGone(pid));
  CoordinatorMessage stop;
  stop.mutable_stop_assignment()->set_job_id("j-term");
  stop.mutable_stop_assignment()->mutable_grace()->set_seconds(5);
  stop.mutable_stop_assignment()->set_reason("moved off the draining worker");
  ASSERT_TRUE(coordinator_.Send(stop));
  std::optional<WorkerMessage> exited = coordinator_.Next(WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().job_id(), "j-term");
  EXPECT_EQ(exited->process_exited().exit().signal(), SIGTERM);
  const int status = WaitWorkerExit();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_EQ(ReadFileOrEmpty(work_dir_ + "/jobs/j-term/gen-1/rank-0/stdout.log"), "ready\n");

  StartWorker();
  reg = coordinator_.Next(WorkerMessage::kRegister);
  ASSERT_TRUE(reg.has_value());
  EXPECT_EQ(reg->register_().worker_id(), worker_id);
  EXPECT_EQ(reg->register_().assignments_size(), 0);
  EXPECT_FALSE(reg->register_().draining());
}

TEST_F(WorkerE2eTest, ASecondSigtermEndsTheDrainAtOnce) {
  StartWorker();
  ASSERT_TRUE(coordinator_.Next(WorkerMessage::kRegister).has_value());
  ASSERT_TRUE(WaitUntil(
      [&] { return coordinator_.Send(StartCommand("j-again", 1, "exec sleep 1000")); }));
  std::optional<WorkerMessage> started = coordinator_.Next(WorkerMessage::kAssignmentStarted);
  ASSERT_TRUE(started.has_value());
  const int pid = started->assignment_started().ranks(0).pid();
  ASSERT_EQ(::kill(worker_pid_, SIGTERM), 0);
  ASSERT_TRUE(coordinator_.Next(WorkerMessage::kDraining).has_value());
  // The coordinator never moves the job; the default drain would last 30 s.
  ASSERT_EQ(::kill(worker_pid_, SIGTERM), 0);
  std::optional<WorkerMessage> exited = coordinator_.Next(WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().exit().signal(), SIGTERM);
  const int status = WaitWorkerExit();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(ProcessGone(pid));
}

TEST_F(WorkerE2eTest, SigintStopsRanksAtOnceAndReportsTheirExits) {
  StartWorker();
  ASSERT_TRUE(coordinator_.Next(WorkerMessage::kRegister).has_value());
  // Right after the spawn: a stop signal that races the child's start must still count.
  ASSERT_TRUE(WaitUntil(
      [&] { return coordinator_.Send(StartCommand("j-int", 1, "exec sleep 1000")); }));
  std::optional<WorkerMessage> started = coordinator_.Next(WorkerMessage::kAssignmentStarted);
  ASSERT_TRUE(started.has_value());
  const int pid = started->assignment_started().ranks(0).pid();
  ASSERT_EQ(::kill(worker_pid_, SIGINT), 0);
  std::optional<WorkerMessage> exited = coordinator_.Next(WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().exit().signal(), SIGTERM);
  const int status = WaitWorkerExit();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_TRUE(ProcessGone(pid));
  EXPECT_FALSE(coordinator_.Next(WorkerMessage::kDraining, absl::ZeroDuration()).has_value());
}

// ---- Job isolation (docs/SECURITY.md, "Job isolation on a worker"). ----

bool LandlockAvailable() {
  return ::syscall(SYS_landlock_create_ruleset, nullptr, 0, 1U /* _VERSION */) >= 1;
}

// True once no process `pid` exists, not even as a zombie; reaps nothing itself.
bool NoSuchProcess(pid_t pid) { return ::kill(pid, 0) != 0 && errno == ESRCH; }

TEST_F(WorkerE2eTest, ACommandJobCannotWriteIntoAnotherJobsDirectoryOrReadItsCheckpoints) {
  if (!LandlockAvailable()) GTEST_SKIP() << "no Landlock in this kernel";
  StartWorker();
  ASSERT_TRUE(coordinator_.Next(WorkerMessage::kRegister).has_value());
  // Job A keeps a checkpoint in its own directory (its rank runs in gen-1/rank-0 of it).
  ASSERT_TRUE(WaitUntil([&] {
    return coordinator_.Send(StartCommand(
        "j-a", 1, "mkdir -p ../../ckpt && echo secret > ../../ckpt/c.pt && echo a-ready; "
                  "exec sleep 1000"));
  }));
  ASSERT_THAT(LinesUntil("j-a", "a-ready"), ::testing::HasSubstr("a-ready"));
  const std::string a_ckpt = work_dir_ + "/jobs/j-a/ckpt";

  // Job B, the same user on the same worker, tries to read, plant and delete.
  ASSERT_TRUE(coordinator_.Send(StartCommand(
      "j-b", 1,
      absl::StrCat("A=", a_ckpt, "; cat $A/c.pt; echo read=$?; echo x > $A/planted.pt; ",
                   "echo write=$?; rm -f $A/c.pt; echo rm=$?; ls $A; echo list=$?; ",
                   "ln -s $A ../../a-link && cat ../../a-link/c.pt; echo via-link=$?; ",
                   "echo mine > ../../mine && echo own=ok; echo b-done"))));
  const std::string b = LinesUntil("j-b", "b-done");
  EXPECT_THAT(b, ::testing::AllOf(::testing::HasSubstr("own=ok"), ::testing::HasSubstr("b-done")));
  for (const char* denied : {"read=0", "write=0", "rm=0", "list=0", "via-link=0", "secret"}) {
    EXPECT_THAT(b, ::testing::Not(::testing::HasSubstr(denied))) << b;
  }
  EXPECT_EQ(ReadFileOrEmpty(a_ckpt + "/c.pt"), "secret\n");
  EXPECT_NE(::access((a_ckpt + "/planted.pt").c_str(), F_OK), 0);
  // Its own directory it may write.
  EXPECT_EQ(ReadFileOrEmpty(work_dir_ + "/jobs/j-b/mine"), "mine\n");
}

// In-memory snapshots (BATON_SNAPSHOT_DIR, <work_dir>/snapshots/<job>): a job has its own,
// kept by the worker, and cannot reach another job's, by its path or from its own.
TEST_F(WorkerE2eTest, AJobCannotReadOrReplaceAnotherJobsSnapshots) {
  if (!LandlockAvailable()) GTEST_SKIP() << "no Landlock in this kernel";
  StartWorker();
  ASSERT_TRUE(coordinator_.Next(WorkerMessage::kRegister).has_value());
  ASSERT_TRUE(WaitUntil([&] {
    return coordinator_.Send(StartCommand(
        "j-a", 1,
        "echo secret > $BATON_SNAPSHOT_DIR/snapshot-rank0.bin && echo a-dir=$BATON_SNAPSHOT_DIR "
        "&& echo a-ready; exec sleep 1000"));
  }));
  const std::string a = LinesUntil("j-a", "a-ready");
  const std::string a_dir = work_dir_ + "/snapshots/j-a";
  ASSERT_THAT(a, ::testing::HasSubstr("a-dir=" + a_dir));
  ASSERT_TRUE(coordinator_.Send(StartCommand(
      "j-b", 1,
      absl::StrCat("A=", a_dir, "; cat $A/snapshot-rank0.bin; echo read=$?; ",
                   "cat $BATON_SNAPSHOT_DIR/../j-a/snapshot-rank0.bin; echo relative=$?; ",
                   "echo x > $A/snapshot-rank1.bin; echo write=$?; ls $A; echo list=$?; ",
                   "ls $BATON_SNAPSHOT_DIR/..; echo list_root=$?; ",
                   "echo mine > $BATON_SNAPSHOT_DIR/snapshot-rank0.bin && echo own=ok; ",
                   "echo b-done"))));
  const std::string b = LinesUntil("j-b", "b-done");
  EXPECT_THAT(b, ::testing::HasSubstr("own=ok"));
  for (const char* denied :
       {"read=0", "relative=0", "write=0", "list=0", "list_root=0", "secret"}) {
    EXPECT_THAT(b, ::testing::Not(::testing::HasSubstr(denied))) << b;
  }
  EXPECT_EQ(ReadFileOrEmpty(a_dir + "/snapshot-rank0.bin"), "secret\n");
  EXPECT_NE(::access((a_dir + "/snapshot-rank1.bin").c_str(), F_OK), 0);
  EXPECT_EQ(ReadFileOrEmpty(work_dir_ + "/snapshots/j-b/snapshot-rank0.bin"), "mine\n");
}

// A job id is unique within one coordinator's state only. A tenant whose job has the id of
// an ended job whose snapshots this worker still keeps (submitted to another coordinator,
// or after the state was reset) gets a directory of its own incarnation (<id>.<creation
// ns>): it neither finds the other job's snapshots in its BATON_SNAPSHOT_DIR (where a
// restore would load them) nor reaches them by the name it computes from that creation time.
TEST_F(WorkerE2eTest, AJobWithAnEndedJobsIdButAnotherCreationTimeFindsNoneOfItsSnapshots) {
  if (!LandlockAvailable()) GTEST_SKIP() << "no Landlock in this kernel";
  StartWorker();
  ASSERT_TRUE(coordinator_.Next(WorkerMessage::kRegister).has_value());
  const int64_t victim_s = 1700000000;
  CoordinatorMessage victim =
      StartCommand("j-same", 1,
                   "echo secret > $BATON_SNAPSHOT_DIR/snapshot-rank0.bin && "
                   "echo dir=$BATON_SNAPSHOT_DIR && echo victim-done");
  victim.mutable_start_assignment()->mutable_job_create_time()->set_seconds(victim_s);
  victim.mutable_start_assignment()->mutable_job_create_time()->set_nanos(123456789);
  ASSERT_TRUE(WaitUntil([&] { return coordinator_.Send(victim); }));
  const std::string victim_dir =
      absl::StrCat(work_dir_, "/snapshots/j-same.", victim_s, "123456789");
  ASSERT_THAT(LinesUntil("j-same", "victim-done"), ::testing::HasSubstr("dir=" + victim_dir));
  std::optional<WorkerMessage> exited = coordinator_.Next(WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  ASSERT_EQ(exited->process_exited().exit().exit_code(), 0);

  // The same id, created later. Generation 2, so that the worker takes it whether or not it
  // has forgotten the ended assignment yet: even as the "next generation" of the id, the
  // new creation time gets a directory of its own.
  CoordinatorMessage tenant = StartCommand(
      "j-same", 1,
      absl::StrCat("echo tenant-dir=$BATON_SNAPSHOT_DIR; ",
                   "cat $BATON_SNAPSHOT_DIR/snapshot-rank0.bin; echo own_copy=$?; ",
                   "cat ", victim_dir, "/snapshot-rank0.bin; echo by_name=$?; ",
                   "cat $BATON_SNAPSHOT_DIR/../j-same.", victim_s,
                   "123456789/snapshot-rank0.bin; echo relative=$?; ",
                   "echo x > ", victim_dir, "/snapshot-rank0.bin; echo overwrite=$?; ",
                   "echo tenant-done"));
  tenant.mutable_start_assignment()->set_generation(2);
  tenant.mutable_start_assignment()->mutable_job_create_time()->set_seconds(victim_s + 60);
  ASSERT_TRUE(WaitUntil([&] { return coordinator_.Send(tenant); }));
  const std::string out = LinesUntil("j-same", "tenant-done");
  EXPECT_THAT(out, ::testing::HasSubstr(absl::StrCat("tenant-dir=", work_dir_, "/snapshots/j-same.",
                                                     victim_s + 60, "000000000")));
  for (const char* denied : {"own_copy=0", "by_name=0", "relative=0", "overwrite=0", "secret"}) {
    EXPECT_THAT(out, ::testing::Not(::testing::HasSubstr(denied))) << out;
  }
  EXPECT_EQ(ReadFileOrEmpty(victim_dir + "/snapshot-rank0.bin"), "secret\n");
}

TEST_F(WorkerE2eTest, ACheckpointDirOutsideTheAllowedRootsOrEscapingThemFailsTheJob) {
  const std::string shared = MakeTestDir("allowed");
  const std::string elsewhere = MakeTestDir("elsewhere");
  ASSERT_EQ(::symlink(elsewhere.c_str(), (shared + "/link").c_str()), 0);
  StartWorker({"--allowed_paths=" + shared});
  ASSERT_TRUE(coordinator_.Next(WorkerMessage::kRegister).has_value());
  const std::pair<const char*, std::string> cases[] = {
      {"j-outside", elsewhere + "/ckpt"},
      {"j-dotdot", shared + "/../" + elsewhere.substr(elsewhere.rfind('/') + 1) + "/ckpt"},
      {"j-symlink", shared + "/link/ckpt"},
      {"j-other-job", work_dir_ + "/jobs/j-victim/ckpt"},
  };
  for (const auto& [job, checkpoint_dir] : cases) {
    CoordinatorMessage start = StartCommand(job, 1, "echo started");
    start.mutable_start_assignment()->mutable_spec()->set_checkpoint_dir(checkpoint_dir);
    ASSERT_TRUE(WaitUntil([&] { return coordinator_.Send(start); }));
    std::optional<baton::v1::AssignmentFailed> failed = FailureOf(job);
    ASSERT_TRUE(failed.has_value()) << job;
    EXPECT_EQ(failed->reason(), "PathNotAllowed") << job;
    EXPECT_THAT(failed->message(),
                ::testing::AllOf(::testing::HasSubstr("checkpoint_dir: " + checkpoint_dir),
                                 ::testing::HasSubstr("is not under an allowed path")))
        << job;
  }
  EXPECT_FALSE(std::filesystem::exists(elsewhere + "/ckpt"));
  // Under the allowed root it runs.
  CoordinatorMessage ok = StartCommand("j-inside", 1, "echo started");
  ok.mutable_start_assignment()->mutable_spec()->set_checkpoint_dir(shared + "/j-inside");
  ASSERT_TRUE(coordinator_.Send(ok));
  std::optional<WorkerMessage> started = coordinator_.Next(WorkerMessage::kAssignmentStarted);
  ASSERT_TRUE(started.has_value());
  EXPECT_EQ(started->assignment_started().job_id(), "j-inside");
}

TEST_F(WorkerE2eTest, ADoubleForkedSetsidDaemonDoesNotOutliveItsJob) {
  StartWorker();
  ASSERT_TRUE(coordinator_.Next(WorkerMessage::kRegister).has_value());
  ASSERT_TRUE(WaitUntil([&] {
    return coordinator_.Send(StartCommand(
        "j-daemon", 1,
        "setsid sh -c 'sleep 1000 </dev/null >/dev/null 2>&1 3>&- & echo \"daemon $!\"'; "
        "exit 0"));
  }));
  const std::map<int, int> daemon = WaitForNumbers("j-daemon", "daemon ", 1);
  ASSERT_EQ(daemon.size(), 1u);
  const pid_t pid = daemon.begin()->second;
  std::optional<WorkerMessage> exited = coordinator_.Next(WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().job_id(), "j-daemon");
  EXPECT_EQ(exited->process_exited().exit().exit_code(), 0);
  // Killed and reaped before the exit was reported: no process, no zombie.
  EXPECT_TRUE(NoSuchProcess(pid)) << "pid " << pid << " outlived its job";
  if (!NoSuchProcess(pid)) ::kill(pid, SIGKILL);
}

TEST_F(WorkerE2eTest, TheWorkerReapsARankWhoseShimWasKilled) {
  // The rank kills its own shim: it is reparented to the worker (a child subreaper), which
  // kills its group and must also reap it, though no Process waits for it any more.
  StartWorker();
  ASSERT_TRUE(coordinator_.Next(WorkerMessage::kRegister).has_value());
  ASSERT_TRUE(WaitUntil([&] {
    return coordinator_.Send(StartCommand(
        "j-shim", 1, "while [ ! -e go ]; do sleep 0.01; done; kill -9 $PPID; exec sleep 1000"));
  }));
  std::optional<WorkerMessage> started = coordinator_.Next(WorkerMessage::kAssignmentStarted);
  ASSERT_TRUE(started.has_value());
  const pid_t pid = started->assignment_started().ranks(0).pid();
  // Only once the shim reported the start: then the rank kills it.
  { std::ofstream(work_dir_ + "/jobs/j-shim/gen-1/rank-0/go") << "go"; }
  std::optional<WorkerMessage> exited = coordinator_.Next(WorkerMessage::kProcessExited);
  ASSERT_TRUE(exited.has_value());
  EXPECT_EQ(exited->process_exited().exit().signal(), SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return NoSuchProcess(pid); })) << "pid " << pid << " left";
}

}  // namespace
}  // namespace baton::worker
