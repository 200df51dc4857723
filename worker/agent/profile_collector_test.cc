#include "worker/agent/profile_collector.h"

#include <signal.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "common/testing/status_matchers.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/testing/fake_process_launcher.h"
#include "worker/testing/process_test_util.h"

namespace baton::worker {
namespace {

using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

class NullListener final : public SupervisorListener {
 public:
  void OnLogLine(const std::string&, baton::v1::LogLine) override {}
  void OnMetricPoint(const std::string&, baton::v1::MetricPoint) override {}
  void OnHeartbeat(const std::string&, baton::v1::RankBeat, absl::Time) override {}
  void OnReportsPending() override {}
};

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void WriteAll(const std::string& path, const std::string& content) {
  std::ofstream out(path);
  out << content;
}

class ProfileCollectorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTestDir("profile-collector");
    SupervisorOptions o;
    o.work_dir = dir_;
    o.trainer_path = "/opt/baton/baton-trainer";
    supervisor_ = std::make_unique<Supervisor>(o, &launcher_, &clock_, &listener_);
    ASSERT_OK(supervisor_->Start());
  }
  void TearDown() override {
    collector_.reset();
    for (size_t i = 0; launcher_.process(i) != nullptr; ++i) {
      baton::v1::ProcessExit e;
      e.set_exit_code(-1);
      e.set_signal(SIGKILL);
      launcher_.process(i)->Exit(e);
    }
    supervisor_->Shutdown(absl::ZeroDuration());
  }

  void MakeCollector(ProfileCollectorOptions options = {}) {
    collector_ = std::make_unique<ProfileCollector>(options, supervisor_.get(), &clock_,
                                                    [this](baton::v1::WorkerMessage msg) {
                                                      absl::MutexLock lock(&mu_);
                                                      sent_.push_back(msg.profile_trace());
                                                    });
  }

  // Starts `ranks` ranks of job `job` generation 1: the built-in trainer, or a command.
  void StartJob(const std::string& job, int ranks, bool trainer = true) {
    baton::v1::StartAssignment a;
    a.set_job_id(job);
    a.set_generation(1);
    a.set_world_size(ranks);
    a.set_master_addr("127.0.0.1");
    a.set_master_port(29500);
    if (trainer) {
      a.mutable_spec()->mutable_trainer()->set_model("mlp");
    } else {
      a.mutable_spec()->mutable_command()->add_argv("./run.sh");
    }
    for (int r = 0; r < ranks; ++r) {
      baton::v1::RankInfo* info = a.add_ranks();
      info->set_rank(r);
      info->set_local_rank(r);
      info->set_local_world_size(ranks);
      info->set_worker_id("w-test");
    }
    ASSERT_OK(supervisor_->StartAssignment(a));
  }

  static baton::v1::ProfileRanks Request(const std::string& job, std::vector<int32_t> ranks,
                                         absl::Duration timeout = absl::Seconds(30)) {
    baton::v1::ProfileRanks r;
    r.set_job_id(job);
    r.set_generation(1);
    r.set_request_id("p1-1700000000000");
    for (int32_t rank : ranks) r.add_ranks(rank);
    r.set_steps(2);
    *r.mutable_timeout() = ToProto(timeout);
    return r;
  }

  std::string ProfileDir(const std::string& job, int rank) const {
    return absl::StrCat(dir_, "/jobs/", job, "/gen-1/rank-", rank, "/profile");
  }

  std::vector<baton::v1::ProfileTrace> sent() const {
    absl::MutexLock lock(&mu_);
    return sent_;
  }

  std::string dir_;
  FakeClock clock_;
  FakeProcessLauncher launcher_;
  NullListener listener_;
  std::unique_ptr<Supervisor> supervisor_;
  std::unique_ptr<ProfileCollector> collector_;
  mutable absl::Mutex mu_;
  std::vector<baton::v1::ProfileTrace> sent_ ABSL_GUARDED_BY(mu_);
};

TEST_F(ProfileCollectorTest, TrainerRanksGetAProfileDir) {
  StartJob("j-1", 1);
  ASSERT_EQ(launcher_.requests().size(), 1u);
  EXPECT_THAT(launcher_.requests()[0].argv, Contains("--profile_dir=" + ProfileDir("j-1", 0)));
  EXPECT_TRUE(std::filesystem::is_directory(ProfileDir("j-1", 0)));
}

TEST_F(ProfileCollectorTest, WritesTheRequestSignalsAndSendsTheTracesBack) {
  StartJob("j-1", 2);
  MakeCollector();
  baton::v1::ProfileRanks request = Request("j-1", {0, 1});
  request.set_start_step(120);
  collector_->Start(request);
  for (int rank : {0, 1}) {
    EXPECT_EQ(ReadAll(ProfileDir("j-1", rank) + "/profile-request"),
              "id=p1-1700000000000 steps=2 start_step=120\n");
    EXPECT_THAT(launcher_.process(rank)->signals(), Contains(SIGUSR2));
  }
  EXPECT_EQ(collector_->watching(), 2u);
  clock_.Advance(absl::Milliseconds(100));
  EXPECT_THAT(sent(), IsEmpty());  // Nothing written yet.

  WriteAll(ProfileDir("j-1", 1) + "/trace-p1-1700000000000-rank1.json", "{\"traceEvents\":[]}");
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_EQ(sent().size(), 1u);
  EXPECT_EQ(sent()[0].rank(), 1);
  EXPECT_EQ(sent()[0].job_id(), "j-1");
  EXPECT_EQ(sent()[0].generation(), 1);
  EXPECT_EQ(sent()[0].request_id(), "p1-1700000000000");
  EXPECT_EQ(sent()[0].trace_json(), "{\"traceEvents\":[]}");
  EXPECT_EQ(sent()[0].error(), "");

  // The trainer refused rank 0's request.
  WriteAll(ProfileDir("j-1", 0) + "/trace-unknown-rank0.error", "profile request: bad token\n");
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_EQ(sent().size(), 2u);
  EXPECT_EQ(sent()[1].rank(), 0);
  EXPECT_EQ(sent()[1].error(), "the trainer refused the request: profile request: bad token");
  EXPECT_EQ(collector_->watching(), 0u);
  // No more polls once nothing is waited for: nothing is sent twice.
  clock_.Advance(absl::Seconds(60));
  EXPECT_EQ(sent().size(), 2u);
}

TEST_F(ProfileCollectorTest, StaleOutputsOfTheSameIdAreRemovedFirst) {
  StartJob("j-1", 1);
  MakeCollector();
  const std::string stale = ProfileDir("j-1", 0) + "/trace-p1-1700000000000-rank0.json";
  WriteAll(stale, "{\"old\":1}");
  WriteAll(ProfileDir("j-1", 0) + "/trace-unknown-rank0.error", "old error");
  collector_->Start(Request("j-1", {0}));
  clock_.Advance(absl::Milliseconds(100));
  EXPECT_THAT(sent(), IsEmpty());
}

TEST_F(ProfileCollectorTest, ASymlinkPlantedByTheRankIsNeverFollowed) {
  StartJob("j-1", 1);
  MakeCollector();
  // The rank replaced its profile directory with a symlink to another job's directory.
  const std::string victim = MakeTestDir("profile-victim");
  std::filesystem::remove_all(ProfileDir("j-1", 0));
  std::filesystem::create_directory_symlink(victim, ProfileDir("j-1", 0));
  collector_->Start(Request("j-1", {0}));
  ASSERT_EQ(sent().size(), 1u);
  EXPECT_THAT(sent()[0].error(), HasSubstr("symlinks are not followed"));
  EXPECT_TRUE(std::filesystem::is_empty(victim));
  EXPECT_THAT(launcher_.process(0)->signals(), Not(Contains(SIGUSR2)));
}

TEST_F(ProfileCollectorTest, AFifoInPlaceOfTheTraceIsAnErrorNotAHang) {
  StartJob("j-1", 1);
  MakeCollector();
  collector_->Start(Request("j-1", {0}));
  const std::string trace = ProfileDir("j-1", 0) + "/trace-p1-1700000000000-rank0.json";
  ASSERT_EQ(::mkfifo(trace.c_str(), 0600), 0);
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_EQ(sent().size(), 1u);
  EXPECT_THAT(sent()[0].error(), HasSubstr("is not a regular file"));
}

TEST_F(ProfileCollectorTest, NoTraceBeforeTheTimeoutIsAnError) {
  StartJob("j-1", 1);
  MakeCollector();
  collector_->Start(Request("j-1", {0}, absl::Seconds(5)));
  clock_.Advance(absl::Seconds(5) - absl::Milliseconds(100));
  EXPECT_THAT(sent(), IsEmpty());
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_EQ(sent().size(), 1u);
  EXPECT_THAT(sent()[0].error(), HasSubstr("no trace from rank 0 before the timeout"));
  EXPECT_EQ(collector_->watching(), 0u);
}

TEST_F(ProfileCollectorTest, ARankThatStopsBeforeItsTraceIsAnError) {
  StartJob("j-1", 1);
  MakeCollector();
  collector_->Start(Request("j-1", {0}));
  baton::v1::ProcessExit exit;
  exit.set_exit_code(0);
  launcher_.process(0)->Exit(exit);
  ASSERT_TRUE(
      WaitUntil([&] { return !supervisor_->ProfileDir("j-1", 1, 0).ok(); }, absl::Seconds(20)));
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_EQ(sent().size(), 1u);
  EXPECT_THAT(sent()[0].error(), HasSubstr("stopped running before it wrote its trace"));
}

TEST_F(ProfileCollectorTest, ATraceOverTheLimitIsAnErrorSayingSo) {
  StartJob("j-1", 1);
  ProfileCollectorOptions options;
  options.max_trace_bytes = 10;
  MakeCollector(options);
  collector_->Start(Request("j-1", {0}));
  WriteAll(ProfileDir("j-1", 0) + "/trace-p1-1700000000000-rank0.json", std::string(11, 'x'));
  clock_.Advance(absl::Milliseconds(100));
  ASSERT_EQ(sent().size(), 1u);
  EXPECT_THAT(sent()[0].error(), HasSubstr("has 11 bytes, more than the 10"));
  EXPECT_EQ(sent()[0].trace_json(), "");
}

TEST_F(ProfileCollectorTest, RanksThatCannotBeAskedAreAnsweredAtOnce) {
  StartJob("j-cmd", 1, /*trainer=*/false);
  StartJob("j-1", 1);
  MakeCollector();
  collector_->Start(Request("j-cmd", {0}));
  collector_->Start(Request("j-1", {3}));  // Not on this worker.
  baton::v1::ProfileRanks bad_id = Request("j-1", {0});
  bad_id.set_request_id("../x");
  collector_->Start(bad_id);
  const std::vector<baton::v1::ProfileTrace> answers = sent();
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_THAT(answers[0].error(), HasSubstr("profiling needs the built-in trainer"));
  EXPECT_THAT(answers[1].error(), HasSubstr("no rank 3 of job j-1"));
  EXPECT_THAT(answers[2].error(), HasSubstr("request_id '../x'"));
  EXPECT_THAT(launcher_.process(0)->signals(), Not(Contains(SIGUSR2)));
  EXPECT_THAT(launcher_.process(1)->signals(), Not(Contains(SIGUSR2)));
  EXPECT_EQ(collector_->watching(), 0u);
}

TEST_F(ProfileCollectorTest, BoundedWaitsForAtMostMaxWatchesRanks) {
  StartJob("j-1", 2);
  ProfileCollectorOptions options;
  options.max_watches = 1;
  MakeCollector(options);
  collector_->Start(Request("j-1", {0, 1}));
  ASSERT_EQ(sent().size(), 1u);
  EXPECT_EQ(sent()[0].rank(), 1);
  EXPECT_THAT(sent()[0].error(), HasSubstr("at most 1"));
  EXPECT_EQ(collector_->watching(), 1u);
  // The same request again (a duplicate) is carried out once.
  collector_->Start(Request("j-1", {0}));
  EXPECT_EQ(sent().size(), 1u);
  EXPECT_EQ(collector_->watching(), 1u);
}

}  // namespace
}  // namespace baton::worker
