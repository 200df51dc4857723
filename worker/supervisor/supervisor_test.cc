#include "worker/supervisor/supervisor.h"

#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <thread>

#include "absl/algorithm/container.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/agent/report_ledger.h"
#include "worker/process/posix_process_launcher.h"
#include "worker/testing/fake_process_launcher.h"
#include "worker/testing/process_test_util.h"

namespace baton::worker {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Records what the supervisor reports. Thread-safe.
class RecordingListener final : public SupervisorListener {
 public:
  void OnLogLine(const std::string& job_id, baton::v1::LogLine line) override {
    absl::MutexLock lock(&mu_);
    events_.push_back(absl::StrCat("log:", line.text()));
    lines_.push_back(std::move(line));
  }
  void OnMetricPoint(const std::string& job_id, baton::v1::MetricPoint point) override {
    absl::MutexLock lock(&mu_);
    points_.push_back(std::move(point));
  }
  void OnHeartbeat(const std::string& job_id, baton::v1::RankBeat beat, absl::Time) override {
    absl::MutexLock lock(&mu_);
    beats_.push_back(std::move(beat));
  }
  void OnReportsPending() override {
    absl::MutexLock lock(&mu_);
    events_.push_back("reports");
  }
  std::vector<baton::v1::RankBeat> beats() const {
    absl::MutexLock lock(&mu_);
    return beats_;
  }
  std::vector<baton::v1::LogLine> lines() const {
    absl::MutexLock lock(&mu_);
    return lines_;
  }
  std::vector<baton::v1::MetricPoint> points() const {
    absl::MutexLock lock(&mu_);
    return points_;
  }
  std::vector<std::string> events() const {
    absl::MutexLock lock(&mu_);
    return events_;
  }
  // The first relayed line starting with `prefix`, waiting for it up to 20 s.
  std::optional<baton::v1::LogLine> WaitForLine(const std::string& prefix) const {
    std::optional<baton::v1::LogLine> found;
    WaitUntil(
        [&] {
          for (const auto& l : lines()) {
            if (absl::StartsWith(l.text(), prefix)) found = l;
          }
          return found.has_value();
        },
        absl::Seconds(20));
    return found;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<baton::v1::LogLine> lines_ ABSL_GUARDED_BY(mu_);
  std::vector<baton::v1::MetricPoint> points_ ABSL_GUARDED_BY(mu_);
  std::vector<baton::v1::RankBeat> beats_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
};

baton::v1::StartAssignment Assignment(const std::string& job_id, int64_t generation, int ranks,
                                      std::vector<std::string> argv) {
  baton::v1::StartAssignment a;
  a.set_job_id(job_id);
  a.set_generation(generation);
  a.set_world_size(ranks);
  a.set_master_addr("127.0.0.1");
  a.set_master_port(29500);
  for (const std::string& arg : argv) a.mutable_spec()->mutable_command()->add_argv(arg);
  for (int r = 0; r < ranks; ++r) {
    baton::v1::RankInfo* info = a.add_ranks();
    info->set_rank(r);
    info->set_local_rank(r);
    info->set_local_world_size(ranks);
    info->set_worker_id("w-test");
  }
  return a;
}

baton::v1::ProcessExit Exit(int code, int signal = 0) {
  baton::v1::ProcessExit e;
  e.set_exit_code(code);
  e.set_signal(signal);
  return e;
}

std::string EnvValue(const std::vector<std::string>& env, const std::string& name) {
  for (const std::string& e : env) {
    if (absl::StartsWith(e, name + "=")) return e.substr(name.size() + 1);
  }
  return "<unset>";
}

// ---------------------------------------------------------------------------------------
// With a fake launcher and a fake clock: deterministic lifecycle and reporting.
// ---------------------------------------------------------------------------------------

class SupervisorFakeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("supervisor-fake");
    SupervisorOptions o;
    o.work_dir = dir_;
    o.trainer_path = "/opt/baton/baton-trainer";
    o.base_env = {"PATH=/bin", "HOME=/home/w"};
    o.allowed_paths = {"/srv/code"};
    o.default_stop_grace = absl::Seconds(10);
    o.max_line_bytes = 64;
    o.devices = devices_;
    supervisor_ = std::make_unique<Supervisor>(o, &launcher_, &clock_, &listener_);
    reports_ = std::make_unique<ReportLedger>(supervisor_.get());
    ASSERT_OK(supervisor_->Start());
  }
  void TearDown() override {
    // Fake processes only end when told to; end those still running so Shutdown need not
    // wait for them.
    for (size_t i = 0; launcher_.process(i) != nullptr; ++i) {
      launcher_.process(i)->Exit(Exit(-1, SIGKILL));
    }
    supervisor_->Shutdown(absl::ZeroDuration());
  }

  // AcceptAssignment's answer; nullopt for an error.
  std::optional<bool> Accept(const baton::v1::StartAssignment& a) {
    absl::StatusOr<bool> accepted = supervisor_->AcceptAssignment(a);
    return accepted.ok() ? std::optional<bool>(*accepted) : std::nullopt;
  }

  void WaitExited(const std::string& job, int64_t gen, int32_t rank) {
    ASSERT_TRUE(
        WaitUntil([&] { return supervisor_->GetRankState(job, gen, rank) == RankState::kExited; }));
  }

  std::string dir_;
  std::vector<std::string> devices_;  // SupervisorOptions::devices; set before SetUp.
  FakeClock clock_;
  FakeProcessLauncher launcher_;
  RecordingListener listener_;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<ReportLedger> reports_;  // What the agent would report, over supervisor_.
};

TEST_F(SupervisorFakeTest, CommandLaunchRequestsAndRankDirectories) {
  baton::v1::StartAssignment a = Assignment("j-1", 2, 2, {"python", "train.py"});
  (*a.mutable_spec()->mutable_env())["NCCL_DEBUG"] = "INFO";
  ASSERT_OK(supervisor_->StartAssignment(a));
  const std::vector<LaunchRequest> requests = launcher_.requests();
  ASSERT_EQ(requests.size(), 2u);
  for (int r = 0; r < 2; ++r) {
    const std::string rank_dir = absl::StrCat(dir_, "/jobs/j-1/gen-2/rank-", r);
    EXPECT_THAT(requests[r].argv, ElementsAre("python", "train.py"));
    EXPECT_EQ(requests[r].working_dir, rank_dir);
    EXPECT_TRUE(std::filesystem::exists(rank_dir + "/stdout.log"));
    EXPECT_TRUE(std::filesystem::exists(rank_dir + "/stderr.log"));
    EXPECT_EQ(EnvValue(requests[r].env, "RANK"), absl::StrCat(r));
    EXPECT_EQ(EnvValue(requests[r].env, "BATON_GENERATION"), "2");
    EXPECT_EQ(EnvValue(requests[r].env, "BATON_METRICS_FD"), "3");
    EXPECT_EQ(EnvValue(requests[r].env, "NCCL_DEBUG"), "INFO");
    EXPECT_EQ(EnvValue(requests[r].env, "HOME"), "/home/w");
  }
}

// An elastic command job: its ranks find the checkpoint directory in BATON_CHECKPOINT_DIR,
// and a checkpoint request reaches rank 0's process group as SIGUSR1 (its program's side of
// the contract is client/python/baton).
TEST_F(SupervisorFakeTest, ElasticCommandRankGetsCheckpointDirAndSigusr1) {
  baton::v1::StartAssignment a = Assignment("j-1", 1, 2, {"python3", "train.py"});
  a.mutable_spec()->mutable_command()->set_elastic(true);
  a.mutable_spec()->set_checkpoint_dir("/srv/code/ckpt");
  ASSERT_OK(supervisor_->StartAssignment(a));
  const std::vector<LaunchRequest> requests = launcher_.requests();
  ASSERT_EQ(requests.size(), 2u);
  for (const LaunchRequest& r : requests) {
    EXPECT_EQ(EnvValue(r.env, "BATON_CHECKPOINT_DIR"), "/srv/code/ckpt");
  }
  ASSERT_TRUE(
      WaitUntil([&] { return supervisor_->GetRankState("j-1", 1, 0) == RankState::kRunning; }));
  ASSERT_OK(supervisor_->RequestCheckpoint("j-1", 1, 0));
  EXPECT_THAT(launcher_.process(0)->signals(), ElementsAre(SIGUSR1));
  EXPECT_THAT(launcher_.process(1)->signals(), ElementsAre());
  // Without a checkpoint_dir nothing is set.
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j-2", 1, 1, {"python3"})));
  EXPECT_EQ(EnvValue(launcher_.requests().back().env, "BATON_CHECKPOINT_DIR"), "<unset>");
}

// A job's directories and logs are the worker's alone (0700/0600) whatever the umask, and a
// log planted as a symlink is not appended to.
TEST_F(SupervisorFakeTest, JobDirectoriesAndLogsArePrivate) {
  auto mode = [](const std::string& path) {
    struct stat st;
    return ::lstat(path.c_str(), &st) == 0 ? (st.st_mode & 07777) : 07777u;
  };
  const std::string victim = dir_ + "/victim";
  std::filesystem::create_directories(dir_ + "/jobs/j-9/gen-1/rank-0");
  ASSERT_EQ(::symlink(victim.c_str(), (dir_ + "/jobs/j-9/gen-1/rank-0/stdout.log").c_str()), 0);
  const mode_t old_umask = ::umask(0);
  baton::v1::StartAssignment a = Assignment("j-8", 1, 1, {"python"});
  ASSERT_OK(supervisor_->StartAssignment(a));
  baton::v1::StartAssignment b = Assignment("j-9", 1, 1, {"python"});
  ASSERT_OK(supervisor_->StartAssignment(b));
  ::umask(old_umask);
  for (const char* d : {"/jobs/j-8", "/jobs/j-8/gen-1", "/jobs/j-8/gen-1/rank-0"}) {
    EXPECT_EQ(mode(dir_ + d), 0700u) << d;
  }
  EXPECT_EQ(mode(dir_ + "/jobs/j-8/gen-1/rank-0/stdout.log"), 0600u);
  EXPECT_EQ(mode(dir_ + "/jobs/j-8/gen-1/rank-0/stderr.log"), 0600u);
  EXPECT_FALSE(std::filesystem::exists(victim));
  const ReportLedger::PendingReports reports = reports_->GetPending();
  ASSERT_EQ(reports.failed.size(), 1u);
  EXPECT_EQ(reports.failed[0].job_id(), "j-9");
  EXPECT_EQ(reports.failed[0].reason(), "LaunchFailed");
}

TEST_F(SupervisorFakeTest, TrainerArgvAndExplicitWorkingDir) {
  baton::v1::StartAssignment a = Assignment("j-2", 1, 1, {});
  baton::v1::TrainerSpec* t = a.mutable_spec()->mutable_trainer();
  t->set_model("mlp");
  a.mutable_spec()->mutable_budget()->set_max_steps(50);
  ASSERT_OK(supervisor_->StartAssignment(a));
  ASSERT_EQ(launcher_.requests().size(), 1u);
  // Every TrainerSpec field is passed (trainer_args_test checks the rest of the argv).
  EXPECT_THAT(launcher_.requests()[0].argv,
              ::testing::AllOf(Contains("--model=mlp"), Contains("--max_steps=50"),
                               Contains("--checkpoint_dir=" + dir_ + "/jobs/j-2/ckpt")));
  EXPECT_EQ(launcher_.requests()[0].argv.front(), "/opt/baton/baton-trainer");

  baton::v1::StartAssignment b = Assignment("j-3", 1, 1, {"./run.sh"});
  b.mutable_spec()->mutable_command()->set_working_dir("/srv/code");
  ASSERT_OK(supervisor_->StartAssignment(b));
  EXPECT_EQ(launcher_.requests()[1].working_dir, "/srv/code");
}

TEST_F(SupervisorFakeTest, APathOutsideTheAllowedOnesFailsTheAssignmentWithoutLaunching) {
  baton::v1::StartAssignment a = Assignment("j-4", 1, 2, {"./run.sh"});
  a.mutable_spec()->set_checkpoint_dir(dir_ + "/jobs/j-5/ckpt");  // Another job's.
  ASSERT_OK(supervisor_->StartAssignment(a));                     // Accepted; its launch fails.
  EXPECT_THAT(launcher_.requests(), IsEmpty());
  const ReportLedger::PendingReports reports = reports_->GetPending();
  ASSERT_EQ(reports.failed.size(), 1u);
  EXPECT_EQ(reports.failed[0].reason(), "PathNotAllowed");
  EXPECT_EQ(reports.failed[0].code(), baton::v1::ASSIGNMENT_FAILURE_PATH_NOT_ALLOWED);
  EXPECT_THAT(reports.failed[0].message(),
              ::testing::AllOf(HasSubstr("checkpoint_dir: " + dir_ + "/jobs/j-5/ckpt"),
                               HasSubstr("not under an allowed path")));
  EXPECT_EQ(supervisor_->GetRankState("j-4", 1, 0), RankState::kExited);
  EXPECT_EQ(supervisor_->GetRankState("j-4", 1, 1), RankState::kExited);
}

TEST_F(SupervisorFakeTest, ADatasetMissingOnThisWorkerFailsTheAssignmentWithoutLaunching) {
  baton::v1::StartAssignment a = Assignment("j-6", 1, 1, {});
  baton::v1::TrainerSpec* t = a.mutable_spec()->mutable_trainer();
  t->set_model("mlp");
  t->set_dataset("mnist");
  t->set_data_dir(dir_ + "/jobs/j-6");  // The job's own directory: allowed, but empty.
  ASSERT_OK(supervisor_->StartAssignment(a));
  EXPECT_THAT(launcher_.requests(), IsEmpty());
  const ReportLedger::PendingReports reports = reports_->GetPending();
  ASSERT_EQ(reports.failed.size(), 1u);
  EXPECT_EQ(reports.failed[0].reason(), "DataNotFound");
  EXPECT_EQ(reports.failed[0].code(), baton::v1::ASSIGNMENT_FAILURE_DATA_NOT_FOUND);
  EXPECT_THAT(reports.failed[0].message(), HasSubstr("data_dir"));
}

TEST_F(SupervisorFakeTest, RejectsMalformedRequests) {
  EXPECT_THAT(supervisor_->StartAssignment(Assignment("../etc", 1, 1, {"x"})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("job_id")));
  EXPECT_THAT(supervisor_->StartAssignment(Assignment("j", 0, 1, {"x"})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("generation")));
  EXPECT_THAT(supervisor_->StartAssignment(Assignment("j", 1, 0, {"x"})),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("world_size")));
  baton::v1::StartAssignment dup = Assignment("j", 1, 2, {"x"});
  dup.mutable_ranks(1)->set_rank(0);
  EXPECT_THAT(supervisor_->StartAssignment(dup),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("rank 0")));
  EXPECT_THAT(launcher_.requests(), IsEmpty());
  EXPECT_EQ(supervisor_->assignment_count(), 0u);
}

TEST_F(SupervisorFakeTest, ReportsStartThenExitThenForgets) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 1, 1, {"x"})));
  ReportLedger::PendingReports reports = reports_->GetPending();
  ASSERT_EQ(reports.started.size(), 1u);
  EXPECT_EQ(reports.started[0].job_id(), "j");
  ASSERT_EQ(reports.started[0].ranks_size(), 1);
  EXPECT_EQ(reports.started[0].ranks(0).pid(), 100000);
  EXPECT_EQ(reports.started[0].ranks(0).worker_id(), "w-test");
  EXPECT_THAT(reports.exited, IsEmpty());
  reports_->MarkSent(reports.started[0]);
  EXPECT_THAT(reports_->GetPending().started, IsEmpty());

  launcher_.process(0)->Exit(Exit(0));
  WaitExited("j", 1, 0);
  reports = reports_->GetPending();
  ASSERT_EQ(reports.exited.size(), 1u);
  EXPECT_EQ(reports.exited[0].rank(), 0);
  EXPECT_EQ(reports.exited[0].exit().exit_code(), 0);
  reports_->MarkSent(reports.exited[0]);
  EXPECT_EQ(supervisor_->assignment_count(), 0u);
}

// A worker with 4 GPUs, one per slot.
class SupervisorDevicesTest : public SupervisorFakeTest {
 protected:
  SupervisorDevicesTest() { devices_ = {"0", "1", "2", "3"}; }
  // CUDA_VISIBLE_DEVICES of the i-th launch.
  std::string Visible(size_t i) {
    return EnvValue(launcher_.requests().at(i).env, "CUDA_VISIBLE_DEVICES");
  }
};

// Two jobs sharing the worker each see GPUs of their own, in local-rank order (so GPU
// LOCAL_RANK is theirs); a job that finds too few free fails its assignment instead of
// sharing, and the GPUs are free again once an assignment is forgotten.
TEST_F(SupervisorDevicesTest, JobsSharingTheWorkerGetGpusOfTheirOwn) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("a", 1, 2, {"x"})));
  ASSERT_OK(supervisor_->StartAssignment(Assignment("b", 1, 2, {"x"})));
  ASSERT_EQ(launcher_.requests().size(), 4u);
  EXPECT_EQ(Visible(0), "0,1");
  EXPECT_EQ(Visible(1), "0,1");
  EXPECT_EQ(Visible(2), "2,3");
  EXPECT_EQ(Visible(3), "2,3");

  ASSERT_OK(supervisor_->StartAssignment(Assignment("c", 1, 1, {"x"})));
  ReportLedger::PendingReports reports = reports_->GetPending();
  ASSERT_EQ(reports.failed.size(), 1u);
  EXPECT_EQ(reports.failed[0].job_id(), "c");
  EXPECT_EQ(reports.failed[0].reason(), "DevicesBusy");
  EXPECT_EQ(reports.failed[0].code(), baton::v1::ASSIGNMENT_FAILURE_DEVICES_BUSY);
  EXPECT_THAT(reports.failed[0].message(), HasSubstr("held by job(s) a, b"));
  EXPECT_EQ(launcher_.requests().size(), 4u);
  reports_->MarkSent(reports.failed[0]);

  // Job a ends: its assignment is forgotten once its exits are reported.
  for (const auto& started : reports_->GetPending().started) {
    reports_->MarkSent(started);
  }
  for (size_t i : {0, 1}) launcher_.process(i)->Exit(Exit(0));
  WaitExited("a", 1, 0);
  WaitExited("a", 1, 1);
  for (const auto& exited : reports_->GetPending().exited) {
    reports_->MarkSent(exited);
  }
  ASSERT_OK(supervisor_->StartAssignment(Assignment("c", 2, 1, {"x"})));
  EXPECT_EQ(Visible(4), "0");
}

// An elastic restart: the new generation is placed in the job's old slots while the old
// processes may still be exiting, and gets the same GPUs.
TEST_F(SupervisorDevicesTest, ANewGenerationGetsItsJobsGpusWhileTheOldOneExits) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("a", 1, 2, {"x"})));
  ASSERT_OK(supervisor_->StartAssignment(Assignment("b", 1, 1, {"x"})));
  ASSERT_OK(supervisor_->StopAssignment("a", 1, absl::Seconds(10)));
  ASSERT_OK(supervisor_->StartAssignment(Assignment("a", 2, 2, {"x"})));
  ASSERT_EQ(launcher_.requests().size(), 5u);
  EXPECT_EQ(Visible(3), "0,1");
  EXPECT_EQ(Visible(4), "0,1");
  EXPECT_EQ(Visible(2), "2");
}

TEST_F(SupervisorFakeTest, WithoutDevicesRanksInheritTheWorkersGpus) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("a", 1, 1, {"x"})));
  EXPECT_EQ(EnvValue(launcher_.requests().at(0).env, "CUDA_VISIBLE_DEVICES"), "<unset>");
}

TEST_F(SupervisorFakeTest, RepeatedStartOnlyReportsAgain) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 1, 1, {"x"})));
  reports_->MarkSent(reports_->GetPending().started[0]);
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 1, 1, {"x"})));
  EXPECT_EQ(launcher_.requests().size(), 1u);
  EXPECT_EQ(reports_->GetPending().started.size(), 1u);
}

// The grace is kept by the clock's timer: the SIGKILL is sent while Advance() crosses the
// deadline, not whenever a thread next looks at the clock.
TEST_F(SupervisorFakeTest, StopSendsTermThenKillAfterGrace) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 1, 2, {"x"})));
  ASSERT_OK(supervisor_->StopAssignment("j", 1, absl::Seconds(5)));
  for (int i = 0; i < 2; ++i) {
    EXPECT_THAT(launcher_.process(i)->signals(), ElementsAre(SIGTERM));
    EXPECT_EQ(supervisor_->GetRankState("j", 1, i), RankState::kStopping);
  }
  clock_.Advance(absl::Seconds(4));
  EXPECT_THAT(launcher_.process(0)->signals(), ElementsAre(SIGTERM));

  launcher_.process(1)->Exit(Exit(-1, SIGTERM));  // Rank 1 honours SIGTERM.
  WaitExited("j", 1, 1);
  clock_.Advance(absl::Seconds(1));
  EXPECT_THAT(launcher_.process(0)->signals(), ElementsAre(SIGTERM, SIGKILL));
  EXPECT_THAT(launcher_.process(1)->signals(), ElementsAre(SIGTERM));
  EXPECT_EQ(supervisor_->GetRankState("j", 1, 0), RankState::kKilling);

  launcher_.process(0)->Exit(Exit(-1, SIGKILL));
  WaitExited("j", 1, 0);
  const ReportLedger::PendingReports reports = reports_->GetPending();
  ASSERT_EQ(reports.exited.size(), 2u);
  EXPECT_EQ(reports.exited[0].exit().signal(), SIGKILL);
  EXPECT_EQ(reports.exited[1].exit().signal(), SIGTERM);
}

// ---- Healthy ranks kept across a peer's failure (trainer/contract/rejoin_protocol.h) ----

// When the coordinator created job j-r of TrainerAssignment.
constexpr int64_t kJobCreated = 1700000000;

// A 2-rank assignment of the built-in trainer (generation `gen`).
baton::v1::StartAssignment TrainerAssignment(int64_t gen, int port = 29500) {
  baton::v1::StartAssignment a = Assignment("j-r", gen, 2, {});
  *a.mutable_job_create_time() = ToProto(absl::FromUnixSeconds(kJobCreated));
  a.mutable_spec()->mutable_trainer()->set_model("mlp");
  a.mutable_spec()->mutable_budget()->set_max_steps(50);
  a.set_master_port(port);
  return a;
}

TEST_F(SupervisorFakeTest, TrainerRanksGetARejoinSocketCommandsDoNot) {
  ASSERT_OK(supervisor_->StartAssignment(TrainerAssignment(1)));
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j-c", 1, 1, {"python", "x.py"})));
  const std::vector<LaunchRequest> requests = launcher_.requests();
  ASSERT_EQ(requests.size(), 3u);
  EXPECT_TRUE(requests[0].pipe_stdin);
  EXPECT_EQ(EnvValue(requests[0].env, "BATON_REJOIN_FD"), "0");
  EXPECT_FALSE(requests[2].pipe_stdin);
  EXPECT_EQ(EnvValue(requests[2].env, "BATON_REJOIN_FD"), "<unset>");
}

// Rank 0 says it waits; a stop that keeps waiting ranks parks it (its part ends with a kept
// exit, no signal) and stops rank 1 as usual; the next generation takes the process over:
// no new launch for it, the same pid, its part told on its socket, its output labelled with
// the new generation, its exit reported as the new generation's.
TEST_F(SupervisorFakeTest, AWaitingRankIsKeptAndTheNextGenerationTakesItsProcess) {
  ASSERT_OK(supervisor_->StartAssignment(TrainerAssignment(1)));
  std::shared_ptr<FakeProcess> rank0 = launcher_.process(0);
  launcher_.process(1)->Exit(Exit(-1, SIGKILL));  // Rank 1 dies; rank 0 lost its peer.
  WaitExited("j-r", 1, 1);
  rank0->WriteStdin("waiting 1\n");
  // Parked when the pump has read the line, before or after the stop.
  ASSERT_OK(supervisor_->StopAssignment("j-r", 1, absl::Seconds(5), /*keep_waiting=*/true));
  WaitExited("j-r", 1, 0);
  EXPECT_THAT(rank0->signals(), IsEmpty());
  EXPECT_EQ(supervisor_->parked_count(), 1u);
  const ReportLedger::PendingReports reports = reports_->GetPending();
  ASSERT_EQ(reports.exited.size(), 2u);
  EXPECT_TRUE(reports.exited[0].exit().kept_for_rejoin());
  EXPECT_EQ(reports.exited[0].rank(), 0);
  EXPECT_FALSE(reports.exited[1].exit().kept_for_rejoin());

  ASSERT_OK(supervisor_->StartAssignment(TrainerAssignment(2, 29600)));
  ASSERT_EQ(launcher_.requests().size(), 3u);  // Rank 1 only.
  EXPECT_EQ(EnvValue(launcher_.requests()[2].env, "RANK"), "1");
  EXPECT_EQ(supervisor_->GetRankState("j-r", 2, 0), RankState::kRunning);
  EXPECT_EQ(supervisor_->parked_count(), 0u);
  const std::string told = rank0->ReadStdin(10000, absl::Milliseconds(200));
  EXPECT_THAT(told, HasSubstr("BATON_GENERATION=2\n"));
  EXPECT_THAT(told, HasSubstr("RANK=0\n"));
  EXPECT_THAT(told, HasSubstr("MASTER_PORT=29600\n"));
  EXPECT_TRUE(absl::EndsWith(told, "\n\n"));
  rank0->WriteMetrics("{\"step\": 7}\n");
  ASSERT_TRUE(WaitUntil([&] {
    return absl::c_any_of(listener_.points(), [](const baton::v1::MetricPoint& p) {
      return p.generation() == 2 && p.rank() == 0;
    });
  }));
  bool same_pid = false;
  for (const AssignmentFacts& f : supervisor_->ListFacts()) {
    for (const baton::v1::RankInfo& r : f.ranks) {
      same_pid |= f.generation == 2 && r.rank() == 0 && r.pid() == rank0->pid();
    }
  }
  EXPECT_TRUE(same_pid);
  rank0->Exit(Exit(0));
  WaitExited("j-r", 2, 0);
  bool reported = false;
  for (const auto& e : reports_->GetPending().exited) {
    reported |= e.generation() == 2 && e.rank() == 0 && e.exit().exit_code() == 0 &&
                !e.exit().kept_for_rejoin();
  }
  EXPECT_TRUE(reported);
  EXPECT_EQ(supervisor_->illegal_rank_transitions(), 0);
}

// Said during the window: parked then. Not said by its end: stopped as the stop asked
// (not signalled before). A stop without keep_waiting stops at once, as before.
TEST_F(SupervisorFakeTest, SayingItWaitsWithinTheWindowParksItSilenceGetsTheStop) {
  ASSERT_OK(supervisor_->StartAssignment(TrainerAssignment(1)));
  ASSERT_OK(supervisor_->StartAssignment(TrainerAssignment(1)));  // Repeated: no effect.
  ASSERT_OK(supervisor_->StopAssignment("j-r", 1, absl::Seconds(5), /*keep_waiting=*/true));
  launcher_.process(0)->WriteStdin("waiting 1\n");
  WaitExited("j-r", 1, 0);
  EXPECT_EQ(supervisor_->parked_count(), 1u);
  EXPECT_THAT(launcher_.process(1)->signals(), IsEmpty());
  clock_.Advance(absl::Seconds(10) - absl::Milliseconds(1));
  EXPECT_THAT(launcher_.process(1)->signals(), IsEmpty());
  clock_.Advance(absl::Milliseconds(1));
  EXPECT_THAT(launcher_.process(1)->signals(), ElementsAre(SIGTERM));
  EXPECT_EQ(supervisor_->GetRankState("j-r", 1, 1), RankState::kStopping);
  clock_.Advance(absl::Seconds(5));
  EXPECT_THAT(launcher_.process(1)->signals(), ElementsAre(SIGTERM, SIGKILL));
}

TEST_F(SupervisorFakeTest, APlainStopEndsTheWindowAtOnce) {
  ASSERT_OK(supervisor_->StartAssignment(TrainerAssignment(1)));
  launcher_.process(0)->WriteStdin("waiting 1\n");
  ASSERT_OK(supervisor_->StopAssignment("j-r", 1, absl::Seconds(5), /*keep_waiting=*/true));
  ASSERT_OK(supervisor_->StopAssignment("j-r", 1, absl::Seconds(5)));
  EXPECT_THAT(launcher_.process(1)->signals(), ElementsAre(SIGTERM));
}

// A parked process serves only its own job's next generation: another job's assignment
// (the same local rank, a tenant's job that could have learnt the pid) spawns its own, and
// so does a job with the same id but created at another time (another coordinator's, or
// this one's after its state was reset: ids are unique within one coordinator's state);
// a repeated "waiting" line changes nothing.
TEST_F(SupervisorFakeTest, AParkedProcessServesOnlyItsOwnJob) {
  ASSERT_OK(supervisor_->StartAssignment(TrainerAssignment(1)));
  launcher_.process(0)->WriteStdin("waiting 1\nwaiting 1\nwaiting 1\n");
  ASSERT_OK(supervisor_->StopAssignment("j-r", 1, absl::Seconds(5), /*keep_waiting=*/true));
  WaitExited("j-r", 1, 0);
  baton::v1::StartAssignment other = TrainerAssignment(2);
  other.set_job_id("j-other");
  ASSERT_OK(supervisor_->StartAssignment(other));
  EXPECT_EQ(launcher_.requests().size(), 4u);  // Both of j-other's ranks are new processes.
  baton::v1::StartAssignment same_id = TrainerAssignment(2, 29501);
  *same_id.mutable_job_create_time() = ToProto(absl::FromUnixSeconds(kJobCreated + 1));
  ASSERT_OK(supervisor_->StartAssignment(same_id));
  EXPECT_EQ(launcher_.requests().size(), 6u);  // And both of the other j-r's.
  EXPECT_EQ(supervisor_->parked_count(), 1u);
  EXPECT_TRUE(launcher_.process(0)->ReadStdin(1, absl::Milliseconds(100)).empty());
}

// A process keeps its rank when the job has a file per rank outside its directory (a
// sample log: a confined process could not open another rank's); it may change rank
// otherwise (a world-size change).
TEST_F(SupervisorFakeTest, AProcessChangesRankOnlyWithoutPerRankFiles) {
  for (const bool sample_log : {true, false}) {
    const std::string job = sample_log ? "j-log" : "j-nolog";
    baton::v1::StartAssignment g1 = TrainerAssignment(1);
    g1.set_job_id(job);
    if (sample_log) {
      g1.mutable_spec()->mutable_trainer()->set_sample_log(dir_ + "/jobs/" + job + "/samples");
    }
    const size_t first = launcher_.requests().size();
    ASSERT_OK(supervisor_->StartAssignment(g1));
    ASSERT_NE(launcher_.process(first), nullptr) << job;
    launcher_.process(first)->WriteStdin("waiting 1\n");
    ASSERT_OK(supervisor_->StopAssignment(job, 1, absl::Seconds(5), /*keep_waiting=*/true));
    WaitExited(job, 1, 0);
    // Generation 2 puts rank 1 where rank 0 was (local rank 0).
    baton::v1::StartAssignment g2 = g1;
    g2.set_generation(2);
    g2.mutable_ranks(0)->set_rank(1);
    g2.mutable_ranks(1)->set_rank(0);
    const size_t before = launcher_.requests().size();
    ASSERT_OK(supervisor_->StartAssignment(g2));
    EXPECT_EQ(launcher_.requests().size(), before + (sample_log ? 2u : 1u)) << job;
  }
}

// A next generation that fails before spawning (a path it may not use) takes nothing: the
// parked process is let go at once, not left waiting.
TEST_F(SupervisorFakeTest, ANextGenerationRefusedBeforeItsLaunchReleasesTheParked) {
  ASSERT_OK(supervisor_->StartAssignment(TrainerAssignment(1)));
  std::shared_ptr<FakeProcess> rank0 = launcher_.process(0);
  rank0->WriteStdin("waiting 1\n");
  ASSERT_OK(supervisor_->StopAssignment("j-r", 1, absl::Seconds(5), /*keep_waiting=*/true));
  WaitExited("j-r", 1, 0);
  baton::v1::StartAssignment g2 = TrainerAssignment(2);
  g2.mutable_spec()->set_checkpoint_dir("/elsewhere");
  ASSERT_OK(supervisor_->StartAssignment(g2));
  EXPECT_EQ(reports_->GetPending().failed.size(), 1u);
  EXPECT_TRUE(rank0->StdinAtEof());
}

// Nothing takes a parked process: let go after rejoin_timeout (EOF on its socket), SIGKILL
// after the default grace; its end is nobody's report.
TEST_F(SupervisorFakeTest, AParkedProcessNoGenerationTakesIsReleasedThenKilled) {
  ASSERT_OK(supervisor_->StartAssignment(TrainerAssignment(1)));
  std::shared_ptr<FakeProcess> rank0 = launcher_.process(0);
  ASSERT_OK(supervisor_->StopAssignment("j-r", 1, absl::Seconds(5), /*keep_waiting=*/true));
  rank0->WriteStdin("waiting 1\n");
  WaitExited("j-r", 1, 0);
  clock_.Advance(absl::Seconds(10));
  EXPECT_TRUE(rank0->StdinAtEof());
  EXPECT_THAT(rank0->signals(), IsEmpty());
  clock_.Advance(absl::Seconds(10));
  EXPECT_THAT(rank0->signals(), ElementsAre(SIGKILL));
  const size_t reported = reports_->GetPending().exited.size();
  rank0->Exit(Exit(-1, SIGKILL));
  ASSERT_TRUE(WaitUntil([&] { return supervisor_->parked_count() == 0; }));
  EXPECT_EQ(reports_->GetPending().exited.size(), reported);
  EXPECT_EQ(supervisor_->illegal_rank_transitions(), 0);
}

TEST_F(SupervisorFakeTest, StopWithZeroGraceKillsAtOnceAndGenerationZeroMeansAny) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 1, 1, {"x"})));
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 2, 1, {"x"})));
  ASSERT_OK(supervisor_->StopAssignment("j", 0, absl::ZeroDuration()));
  EXPECT_THAT(launcher_.process(0)->signals(), ElementsAre(SIGKILL));
  EXPECT_THAT(launcher_.process(1)->signals(), ElementsAre(SIGKILL));
  EXPECT_THAT(supervisor_->StopAssignment("other", 0, std::nullopt),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("other")));
}

// The lease is kept by the Supervisor's own clock: when it runs out every process gets
// SIGKILL once, whatever its state, and a renewed lease arms it again.
TEST_F(SupervisorFakeTest, ExpiredLeaseKillsEveryProcessOnceAndARenewalArmsItAgain) {
  supervisor_->SetLeaseExpiry(clock_.Now() + absl::Seconds(3));
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 1, 2, {"x"})));
  ASSERT_OK(supervisor_->StartAssignment(Assignment("k", 4, 1, {"x"})));
  ASSERT_OK(supervisor_->StopAssignment("k", 4, absl::Seconds(60)));  // stopping, with grace
  clock_.Advance(absl::Seconds(3) - absl::Nanoseconds(1));
  EXPECT_THAT(launcher_.process(0)->signals(), IsEmpty());
  EXPECT_EQ(supervisor_->lease_expirations(), 0);
  clock_.Advance(absl::Nanoseconds(1));
  EXPECT_THAT(launcher_.process(0)->signals(), ElementsAre(SIGKILL));
  EXPECT_THAT(launcher_.process(1)->signals(), ElementsAre(SIGKILL));
  EXPECT_THAT(launcher_.process(2)->signals(), ElementsAre(SIGTERM, SIGKILL));
  EXPECT_EQ(supervisor_->GetRankState("j", 1, 0), RankState::kKilling);
  EXPECT_EQ(supervisor_->lease_expirations(), 1);

  clock_.Advance(absl::Hours(1));
  EXPECT_EQ(supervisor_->lease_expirations(), 1);  // Once.

  supervisor_->SetLeaseExpiry(clock_.Now() + absl::Seconds(3));  // registered again
  ASSERT_OK(supervisor_->StartAssignment(Assignment("m", 1, 1, {"x"})));
  clock_.Advance(absl::Seconds(3));
  EXPECT_THAT(launcher_.process(3)->signals(), ElementsAre(SIGKILL));
  EXPECT_EQ(supervisor_->lease_expirations(), 2);
  supervisor_->SetLeaseExpiry(absl::InfiniteFuture());  // a coordinator without leases
  clock_.Advance(absl::Hours(1000));
  EXPECT_EQ(supervisor_->lease_expirations(), 2);
}

TEST_F(SupervisorFakeTest, DefaultGraceAndSecondStopOnlyShortens) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 1, 1, {"x"})));
  ASSERT_OK(supervisor_->StopAssignment("j", 1, std::nullopt));  // 10 s default.
  ASSERT_OK(supervisor_->StopAssignment("j", 1, absl::Seconds(60)));
  clock_.Advance(absl::Seconds(10));
  EXPECT_THAT(launcher_.process(0)->signals(), ElementsAre(SIGTERM, SIGKILL));
}

// A rank that cannot be spawned fails the whole assignment: no later rank is spawned, the
// earlier ones are killed, and once they exited one AssignmentFailed is reported (never an
// AssignmentStarted or a ProcessExited). The reason reaches the rank's stderr.log and logs.
TEST_F(SupervisorFakeTest, AFailedSpawnFailsTheAssignmentAndKillsTheRanksSpawned) {
  ASSERT_EQ(Accept(Assignment("j", 1, 3, {"x"})), true);
  EXPECT_THAT(launcher_.requests(), IsEmpty());  // Accepting spawns nothing.
  launcher_.FailLaunch(1, absl::ResourceExhaustedError("fork: out of processes"));
  EXPECT_THAT(supervisor_->LaunchAssignment("j", 1),
              StatusIs(absl::StatusCode::kResourceExhausted, HasSubstr("out of processes")));
  EXPECT_EQ(launcher_.requests().size(), 2u);  // Rank 2 was never tried.
  EXPECT_THAT(launcher_.process(0)->signals(), ElementsAre(SIGKILL));
  EXPECT_EQ(supervisor_->GetRankState("j", 1, 0), RankState::kKilling);
  EXPECT_EQ(supervisor_->GetRankState("j", 1, 1), RankState::kExited);
  EXPECT_EQ(supervisor_->GetRankState("j", 1, 2), RankState::kExited);
  // Rank 0 still runs: nothing to report yet, and the Register lists nothing.
  ReportLedger::PendingReports reports = reports_->GetPending();
  EXPECT_THAT(reports.failed, IsEmpty());
  EXPECT_THAT(reports.started, IsEmpty());
  EXPECT_THAT(reports_->Snapshot(), IsEmpty());
  launcher_.process(0)->Exit(Exit(-1, SIGKILL));
  WaitExited("j", 1, 0);
  reports = reports_->GetPending();
  ASSERT_EQ(reports.failed.size(), 1u);
  EXPECT_THAT(reports.started, IsEmpty());
  EXPECT_THAT(reports.exited, IsEmpty());
  EXPECT_EQ(reports.failed[0].job_id(), "j");
  EXPECT_EQ(reports.failed[0].generation(), 1);
  EXPECT_EQ(reports.failed[0].reason(), "LaunchFailed");
  EXPECT_EQ(reports.failed[0].message(), "rank 1: fork: out of processes");
  const std::vector<baton::v1::LogLine> lines = listener_.lines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rank(), 1);
  EXPECT_EQ(lines[0].stream(), baton::v1::LogLine::STREAM_STDERR);
  EXPECT_THAT(lines[0].text(), HasSubstr("out of processes"));
  EXPECT_THAT(ReadFileOrEmpty(dir_ + "/jobs/j/gen-1/rank-1/stderr.log"),
              HasSubstr("out of processes"));
  reports_->MarkSent(reports.failed[0]);
  EXPECT_EQ(supervisor_->assignment_count(), 0u);
  EXPECT_EQ(supervisor_->illegal_rank_transitions(), 0);
}

// Spawning never holds up a stop: one that comes while the assignment waits for its launch
// fails it at once (nothing is ever spawned); one that comes during the spawns is applied
// as soon as they end.
TEST_F(SupervisorFakeTest, AStopBeforeTheLaunchFailsItAndOneDuringTheSpawnsFollowsThem) {
  ASSERT_EQ(Accept(Assignment("early", 1, 1, {"x"})), true);
  ASSERT_OK(supervisor_->StopAssignment("early", 0, absl::Seconds(5)));
  ReportLedger::PendingReports reports = reports_->GetPending();
  ASSERT_EQ(reports.failed.size(), 1u);
  EXPECT_EQ(reports.failed[0].reason(), "StopRequested");
  EXPECT_THAT(supervisor_->LaunchAssignment("early", 1),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(launcher_.requests(), IsEmpty());

  ASSERT_EQ(Accept(Assignment("late", 1, 1, {"x"})), true);
  launcher_.BlockLaunches();
  std::thread launch([&] { EXPECT_OK(supervisor_->LaunchAssignment("late", 1)); });
  ASSERT_TRUE(launcher_.AwaitBlockedLaunch());
  ASSERT_OK(supervisor_->StopAssignment("late", 1, absl::Seconds(5)));  // Returns at once.
  EXPECT_EQ(supervisor_->GetRankState("late", 1, 0), RankState::kStarting);
  launcher_.ReleaseLaunches();
  launch.join();
  EXPECT_THAT(launcher_.process(0)->signals(), ElementsAre(SIGTERM));
  EXPECT_EQ(supervisor_->GetRankState("late", 1, 0), RankState::kStopping);
  clock_.Advance(absl::Seconds(5));
  EXPECT_THAT(launcher_.process(0)->signals(), ElementsAre(SIGTERM, SIGKILL));
  EXPECT_EQ(supervisor_->illegal_rank_transitions(), 0);
}

// The lease decides at the launch: an assignment accepted before the lease ran out and
// launched after starts nothing; one accepted and not yet launched when it runs out fails.
TEST_F(SupervisorFakeTest, AnAssignmentLaunchedWithoutALeaseFails) {
  supervisor_->SetLeaseExpiry(clock_.Now() + absl::Seconds(1));
  ASSERT_EQ(Accept(Assignment("j", 1, 1, {"x"})), true);
  clock_.Advance(absl::Seconds(1));
  ReportLedger::PendingReports reports = reports_->GetPending();
  ASSERT_EQ(reports.failed.size(), 1u);
  EXPECT_EQ(reports.failed[0].reason(), "LeaseExpired");

  ASSERT_EQ(Accept(Assignment("k", 1, 1, {"x"})), true);
  EXPECT_THAT(supervisor_->LaunchAssignment("k", 1),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("lease ran out")));
  EXPECT_THAT(launcher_.requests(), IsEmpty());
  reports = reports_->GetPending();
  ASSERT_EQ(reports.failed.size(), 2u);
  EXPECT_EQ(reports.failed[1].job_id(), "k");
  EXPECT_EQ(reports.failed[1].reason(), "LeaseExpired");
}

TEST_F(SupervisorFakeTest, FailAssignmentEndsAnAcceptedAssignmentWithItsReason) {
  ASSERT_EQ(Accept(Assignment("j", 2, 2, {"x"})), true);
  EXPECT_EQ(Accept(Assignment("j", 2, 2, {"x"})), false);
  ASSERT_OK(supervisor_->FailAssignment("j", 2, "PeerUnreachable", "worker w2 at h:1: refused"));
  EXPECT_THAT(supervisor_->FailAssignment("j", 2, "Again", ""),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  EXPECT_THAT(supervisor_->LaunchAssignment("j", 2),
              StatusIs(absl::StatusCode::kFailedPrecondition, ::testing::_));
  const ReportLedger::PendingReports reports = reports_->GetPending();
  ASSERT_EQ(reports.failed.size(), 1u);
  EXPECT_EQ(reports.failed[0].reason(), "PeerUnreachable");
  EXPECT_EQ(reports.failed[0].message(), "worker w2 at h:1: refused");
  EXPECT_THAT(listener_.events(), Contains("reports"));
  EXPECT_THAT(launcher_.requests(), IsEmpty());
  reports_->MarkSent(reports.failed[0]);
  EXPECT_EQ(supervisor_->assignment_count(), 0u);
}

TEST_F(SupervisorFakeTest, RelaysLinesAndMetricsAndPublishesExitAfterThem) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 3, 1, {"x"})));
  std::shared_ptr<FakeProcess> p = launcher_.process(0);
  p->WriteMetrics(R"({"step":7,"loss":0.25})"
                  "\n");
  p->WriteMetrics("garbage\n");
  p->WriteMetrics(std::string(100, 'x') + "\n");  // Longer than max_line_bytes (64).
  p->WriteMetrics(R"({"step":8,"loss":0.2})"
                  "\n");
  // A heartbeat line is not a metric point.
  p->WriteMetrics(R"({"beat":4,"step":8,"phase":1,"phase_s":0.5,"coll":9,"waiting":0})"
                  "\n");
  p->WriteStderr("warn\n");
  p->WriteStdout("hello\nlast words");  // Unterminated: emitted at EOF.
  p->Exit(Exit(3));
  WaitExited("j", 3, 0);

  const std::vector<baton::v1::MetricPoint> points = listener_.points();
  ASSERT_EQ(points.size(), 2u);
  EXPECT_EQ(points[0].step(), 7);
  EXPECT_EQ(points[0].values().at("loss"), 0.25);
  EXPECT_EQ(points[0].rank(), 0);
  EXPECT_EQ(points[0].generation(), 3);
  EXPECT_TRUE(points[0].has_time());
  EXPECT_EQ(points[1].step(), 8);
  const std::vector<baton::v1::RankBeat> beats = listener_.beats();
  ASSERT_EQ(beats.size(), 1u);
  EXPECT_EQ(beats[0].seq(), 4);
  EXPECT_EQ(beats[0].generation(), 3);
  EXPECT_EQ(beats[0].phase(), "step");
  EXPECT_EQ(beats[0].collectives(), 9);

  const std::vector<std::string> events = listener_.events();
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), "reports");  // The exit comes after every line.
  EXPECT_THAT(events, Contains("log:hello"));
  EXPECT_THAT(events, Contains("log:last words"));
  EXPECT_THAT(events, Contains("log:warn"));
  for (const auto& l : listener_.lines()) {
    EXPECT_EQ(l.generation(), 3);
    EXPECT_EQ(l.stream(), l.text() == "warn" ? baton::v1::LogLine::STREAM_STDERR
                                             : baton::v1::LogLine::STREAM_STDOUT);
  }
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/jobs/j/gen-3/rank-0/stdout.log"), "hello\nlast words");
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/jobs/j/gen-3/rank-0/stderr.log"), "warn\n");
}

// A rank that prints without end: its log file keeps max_rank_log_bytes and a marker, and
// at most max_rank_log_lines_per_second lines a second reach the coordinator, then one
// marker saying how many did not.
TEST_F(SupervisorFakeTest, ARanksOutputIsBoundedOnDiskAndInRate) {
  supervisor_->Shutdown(absl::ZeroDuration());
  SupervisorOptions o;
  o.work_dir = dir_;
  o.max_line_bytes = 64;
  o.max_rank_log_bytes = 40;
  o.max_rank_log_lines_per_second = 3;
  supervisor_ = std::make_unique<Supervisor>(o, &launcher_, &clock_, &listener_);
  reports_ = std::make_unique<ReportLedger>(supervisor_.get());
  ASSERT_OK(supervisor_->Start());
  ASSERT_OK(supervisor_->StartAssignment(Assignment("chatty", 1, 1, {"x"})));
  std::shared_ptr<FakeProcess> p = launcher_.process(0);
  std::string burst;
  for (int i = 0; i < 8; ++i) absl::StrAppend(&burst, "line ", i, "\n");  // 7 bytes each
  p->WriteStderr(burst);
  ASSERT_TRUE(WaitUntil([&] { return supervisor_->dropped_log_lines() == 5; }));
  clock_.Advance(absl::Seconds(1));
  p->WriteStderr("next second\n");
  p->Exit(Exit(0));
  WaitExited("chatty", 1, 0);

  std::vector<std::string> relayed;
  for (const auto& l : listener_.lines()) relayed.push_back(l.text());
  EXPECT_THAT(relayed, ::testing::ElementsAre(
                           "line 0", "line 1", "line 2",
                           "[baton: 5 more line(s) of this rank's stderr were not relayed: over "
                           "the worker's --max_rank_log_lines_per_second=3; the rank's log file "
                           "on the worker has them, up to --max_rank_log_bytes]",
                           "next second"));
  EXPECT_EQ(ReadFileOrEmpty(dir_ + "/jobs/chatty/gen-1/rank-0/stderr.log"),
            absl::StrCat(burst.substr(0, 40),
                         "\n[baton: this log reached its limit of 40 bytes (the worker's "
                         "--max_rank_log_bytes); the rank's further output is not kept here]\n"));
  EXPECT_EQ(supervisor_->capped_rank_logs(), 1);  // stderr.log; stdout.log stayed empty.
}

TEST_F(SupervisorFakeTest, SnapshotCarriesExitsAndAcknowledgingItForgets) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("done", 1, 1, {"x"})));
  ASSERT_OK(supervisor_->StartAssignment(Assignment("running", 1, 1, {"x"})));
  launcher_.process(0)->Exit(Exit(1));
  WaitExited("done", 1, 0);

  const std::vector<baton::v1::AssignmentStatus> snapshot = reports_->Snapshot();
  ASSERT_EQ(snapshot.size(), 2u);
  EXPECT_EQ(snapshot[0].job_id(), "done");
  ASSERT_TRUE(snapshot[0].ranks(0).has_exit());
  EXPECT_EQ(snapshot[0].ranks(0).exit().exit_code(), 1);
  EXPECT_EQ(snapshot[1].job_id(), "running");
  EXPECT_EQ(snapshot[1].ranks(0).pid(), 100001);
  EXPECT_FALSE(snapshot[1].ranks(0).has_exit());

  reports_->MarkRegistered(snapshot);
  EXPECT_EQ(supervisor_->assignment_count(), 1u);
  const ReportLedger::PendingReports reports = reports_->GetPending();
  EXPECT_THAT(reports.started, IsEmpty());
  EXPECT_THAT(reports.exited, IsEmpty());
}

// A rank that exited while something it left behind holds its pipes is published once the
// drain timeout passes on the clock.
TEST_F(SupervisorFakeTest, AnExitWhosePipesStayOpenIsPublishedAfterTheDrainTimeout) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 1, 1, {"x"})));
  launcher_.process(0)->WriteStdout("partial");
  launcher_.process(0)->ExitLeavingPipesOpen(Exit(0));
  // The output thread collected the exit once it armed the drain deadline (2 s by default).
  ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + absl::Seconds(2)));
  clock_.Advance(absl::Seconds(2) - absl::Nanoseconds(1));
  EXPECT_EQ(supervisor_->GetRankState("j", 1, 0), RankState::kRunning);
  clock_.Advance(absl::Nanoseconds(1));
  WaitExited("j", 1, 0);
  EXPECT_THAT(listener_.events(), ElementsAre("reports", "log:partial", "reports"));
}

TEST_F(SupervisorFakeTest, ShutdownWaitsForExitsAtMostGraceDrainAndMarginOnTheClock) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 1, 1, {"x"})));
  const absl::Time start = clock_.Now();
  std::thread shutdown([&] { supervisor_->Shutdown(absl::Seconds(10)); });
  // SIGKILL at 10 s; the wait ends at 10 + 2 (drain timeout) + 5 s at the latest.
  ASSERT_TRUE(clock_.AwaitTimerAt(start + absl::Seconds(17)));
  EXPECT_THAT(launcher_.process(0)->signals(), ElementsAre(SIGTERM));
  clock_.Advance(absl::Seconds(10));
  EXPECT_THAT(launcher_.process(0)->signals(), ElementsAre(SIGTERM, SIGKILL));
  clock_.Advance(absl::Seconds(7));  // The fake process never dies.
  shutdown.join();
  EXPECT_EQ(supervisor_->GetRankState("j", 1, 0), RankState::kKilling);
}

TEST_F(SupervisorFakeTest, AwaitIdleEndsWhenTheLastExitIsReportedAtTheDeadlineOrWhenEnded) {
  EXPECT_TRUE(supervisor_->AwaitIdle(clock_.Now()));
  ASSERT_OK(supervisor_->StartAssignment(Assignment("j", 1, 1, {"x"})));
  const absl::Time deadline = clock_.Now() + absl::Seconds(30);

  // The last exit reported.
  std::optional<bool> idle;
  std::thread waiter([&] { idle = supervisor_->AwaitIdle(deadline); });
  ASSERT_TRUE(clock_.AwaitTimerAt(deadline));
  reports_->MarkSent(reports_->GetPending().started.at(0));
  launcher_.process(0)->Exit(Exit(0));
  WaitExited("j", 1, 0);
  reports_->MarkSent(reports_->GetPending().exited.at(0));
  waiter.join();
  EXPECT_EQ(idle, true);

  // The deadline.
  ASSERT_OK(supervisor_->StartAssignment(Assignment("k", 1, 1, {"x"})));
  idle.reset();
  waiter = std::thread([&] { idle = supervisor_->AwaitIdle(deadline); });
  ASSERT_TRUE(clock_.AwaitTimerAt(deadline));
  clock_.Advance(absl::Seconds(30));
  waiter.join();
  EXPECT_EQ(idle, false);

  // EndIdleWait(), as a second stop signal does.
  idle.reset();
  waiter = std::thread([&] { idle = supervisor_->AwaitIdle(clock_.Now() + absl::Hours(1)); });
  ASSERT_TRUE(clock_.AwaitTimerAt(clock_.Now() + absl::Hours(1)));
  supervisor_->EndIdleWait();
  waiter.join();
  EXPECT_EQ(idle, false);
  EXPECT_FALSE(supervisor_->AwaitIdle(absl::InfiniteFuture()));
}

TEST_F(SupervisorFakeTest, ShutdownRejectsNewAssignments) {
  supervisor_->Shutdown(absl::ZeroDuration());
  EXPECT_THAT(supervisor_->StartAssignment(Assignment("j", 1, 1, {"x"})),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("shutting down")));
}

// ---------------------------------------------------------------------------------------
// With real processes (/bin/sh) and real signals; the deadlines still on a fake clock.
// ---------------------------------------------------------------------------------------

class SupervisorProcessTest : public ::testing::Test {
 protected:
  void SetUp() override {
    BecomeSubreaper();
    dir_ = MakeTestDir("supervisor-real");
    SupervisorOptions o;
    o.work_dir = dir_;
    o.base_env = {"PATH=/usr/bin:/bin"};
    supervisor_ = std::make_unique<Supervisor>(o, &launcher_, &clock_, &listener_);
    reports_ = std::make_unique<ReportLedger>(supervisor_.get());
    ASSERT_OK(supervisor_->Start());
  }
  void TearDown() override { supervisor_->Shutdown(absl::ZeroDuration()); }

  std::optional<baton::v1::ProcessExit> WaitExit(const std::string& job, int32_t rank) {
    std::optional<baton::v1::ProcessExit> exit;
    WaitUntil(
        [&] {
          for (const auto& e : reports_->GetPending().exited) {
            if (e.job_id() == job && e.rank() == rank) exit = e.exit();
          }
          return exit.has_value();
        },
        absl::Seconds(20));
    return exit;
  }

  std::string dir_;
  FakeClock clock_;
  PosixProcessLauncher launcher_;
  RecordingListener listener_;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<ReportLedger> reports_;  // What the agent would report, over supervisor_.
};

TEST_F(SupervisorProcessTest, EnvironmentOutputLogsMetricsAndExitCode) {
  ASSERT_OK(supervisor_->StartAssignment(Assignment(
      "j-env", 4, 2,
      {"/bin/sh", "-c",
       "echo \"rank=$RANK world=$WORLD_SIZE local=$LOCAL_RANK gen=$BATON_GENERATION "
       "job=$BATON_JOB_ID master=$MASTER_ADDR:$MASTER_PORT restarts=$TORCHELASTIC_RESTART_COUNT\";"
       "echo oops >&2;"
       "echo '{\"step\":5,\"loss\":0.5}' >&$BATON_METRICS_FD;"
       "exit $((RANK + 2))"})));
  for (int r = 0; r < 2; ++r) {
    std::optional<baton::v1::ProcessExit> exit = WaitExit("j-env", r);
    ASSERT_TRUE(exit.has_value()) << "rank " << r;
    EXPECT_EQ(exit->exit_code(), r + 2);
    EXPECT_EQ(exit->signal(), 0);
    const std::string expected = absl::StrCat("rank=", r, " world=2 local=", r,
                                              " gen=4 job=j-env master=127.0.0.1:29500 restarts=3");
    const std::string rank_dir = absl::StrCat(dir_, "/jobs/j-env/gen-4/rank-", r);
    EXPECT_EQ(ReadFileOrEmpty(rank_dir + "/stdout.log"), expected + "\n");
    EXPECT_EQ(ReadFileOrEmpty(rank_dir + "/stderr.log"), "oops\n");
    std::optional<baton::v1::LogLine> line = listener_.WaitForLine(absl::StrCat("rank=", r));
    ASSERT_TRUE(line.has_value());
    EXPECT_EQ(line->text(), expected);
    EXPECT_EQ(line->rank(), r);
    EXPECT_EQ(line->stream(), baton::v1::LogLine::STREAM_STDOUT);
  }
  const std::vector<baton::v1::MetricPoint> points = listener_.points();
  ASSERT_EQ(points.size(), 2u);
  for (const auto& p : points) {
    EXPECT_EQ(p.step(), 5);
    EXPECT_EQ(p.values().at("loss"), 0.5);
    EXPECT_EQ(p.generation(), 4);
  }
  EXPECT_EQ(points[0].rank() + points[1].rank(), 1);
}

TEST_F(SupervisorProcessTest, DeathBySignalIsReported) {
  ASSERT_OK(
      supervisor_->StartAssignment(Assignment("j-sig", 1, 1, {"/bin/sh", "-c", "kill -KILL $$"})));
  std::optional<baton::v1::ProcessExit> exit = WaitExit("j-sig", 0);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->exit_code(), -1);
  EXPECT_EQ(exit->signal(), SIGKILL);
}

TEST_F(SupervisorProcessTest, StopHonouredBySigterm) {
  ASSERT_OK(supervisor_->StartAssignment(
      Assignment("j-term", 1, 1, {"/bin/sh", "-c", "echo ready; exec sleep 1000"})));
  ASSERT_TRUE(listener_.WaitForLine("ready").has_value());
  ASSERT_OK(supervisor_->StopAssignment("j-term", 1, absl::Seconds(30)));
  std::optional<baton::v1::ProcessExit> exit = WaitExit("j-term", 0);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal(), SIGTERM);
}

TEST_F(SupervisorProcessTest, StopKillsAGroupIgnoringSigtermAfterTheGrace) {
  // The shell and its background sleep both ignore SIGTERM (ignored dispositions are
  // inherited), so only the SIGKILL after the grace ends them.
  ASSERT_OK(supervisor_->StartAssignment(Assignment(
      "j-trap", 1, 1,
      {"/bin/sh", "-c", "trap '' TERM; sleep 1000 & echo \"grandchild $!\"; wait; wait"})));
  std::optional<baton::v1::LogLine> line = listener_.WaitForLine("grandchild ");
  ASSERT_TRUE(line.has_value());
  int grandchild = 0;
  ASSERT_TRUE(absl::SimpleAtoi(absl::StripPrefix(line->text(), "grandchild "), &grandchild));
  const int leader = reports_->Snapshot().at(0).ranks(0).pid();
  ASSERT_GT(leader, 0);

  ASSERT_OK(supervisor_->StopAssignment("j-trap", 1, absl::Seconds(30)));
  EXPECT_EQ(supervisor_->GetRankState("j-trap", 1, 0), RankState::kStopping);
  clock_.Advance(absl::Seconds(30) - absl::Nanoseconds(1));
  EXPECT_EQ(supervisor_->GetRankState("j-trap", 1, 0), RankState::kStopping);
  EXPECT_FALSE(ProcessGone(leader));
  clock_.Advance(absl::Nanoseconds(1));  // SIGKILL sent (KILLING, or EXITED already).
  EXPECT_NE(supervisor_->GetRankState("j-trap", 1, 0), RankState::kStopping);
  std::optional<baton::v1::ProcessExit> exit = WaitExit("j-trap", 0);
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->signal(), SIGKILL);
  EXPECT_TRUE(WaitUntil([&] { return ProcessGone(leader) && ProcessGone(grandchild); }));
}

}  // namespace
}  // namespace baton::worker
