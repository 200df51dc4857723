// Golden tests of what the CLI prints: each command and output format is run against the
// in-process fake coordinator with a fixed clock (2024-05-01 12:00:00 UTC) and time zone
// (UTC), and its exit code, stdout and stderr are compared with
// client/testdata/golden/<name>.txt.
//
// After an intended change of the output, regenerate the files and review their diff:
//   BATON_UPDATE_GOLDEN=1 bazel run //client:golden_test

#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli.h"
#include "client/completion.h"
#include "client/commands.h"
#include "client/testing/fake_coordinator.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "gtest/gtest.h"

namespace baton::cli {
namespace {

using baton::v1::Job;

const absl::Time kT0 = absl::FromUnixSeconds(1714564800);  // 2024-05-01 12:00:00 UTC

std::string GoldenPath(const std::string& name) {
  const char* workspace = std::getenv("BUILD_WORKSPACE_DIRECTORY");  // bazel run
  if (workspace != nullptr) {
    return absl::StrCat(workspace, "/client/testdata/golden/", name, ".txt");
  }
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/", std::getenv("TEST_WORKSPACE"),
                      "/client/testdata/golden/", name, ".txt");
}

bool Updating() {
  const char* update = std::getenv("BATON_UPDATE_GOLDEN");
  return update != nullptr && std::string(update) == "1";
}

// Compares `actual` with the golden file `name`, or rewrites it when updating.
void ExpectGolden(const std::string& name, const std::string& actual) {
  const std::string path = GoldenPath(name);
  if (Updating()) {
    std::ofstream(path, std::ios::binary | std::ios::trunc) << actual;
    return;
  }
  std::ifstream in(path, std::ios::binary);
  ASSERT_TRUE(in.good()) << "no golden file " << path
                         << "; run BATON_UPDATE_GOLDEN=1 bazel run //client:golden_test";
  std::stringstream expected;
  expected << in.rdbuf();
  EXPECT_EQ(actual, expected.str())
      << "golden file " << name << ".txt differs; if the change is intended, run "
      << "BATON_UPDATE_GOLDEN=1 bazel run //client:golden_test and review the diff";
}

Job MakeJob(const std::string& id, const std::string& name, baton::v1::JobState state,
            absl::Duration age) {
  Job job;
  job.set_id(id);
  job.set_state(state);
  job.set_owner("alice");
  job.mutable_spec()->set_name(name);
  job.mutable_spec()->mutable_workers()->set_min(2);
  job.mutable_spec()->mutable_workers()->set_max(4);
  job.mutable_spec()->mutable_budget()->set_max_steps(1000);
  *job.mutable_create_time() = ToProto(kT0 - age);
  return job;
}

class GoldenTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int port = 0;
    server_ = ServeFakeCoordinator(fake_, &port);
    ASSERT_NE(server_, nullptr);
    auto channel =
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port), grpc::InsecureChannelCredentials());
    jobs_ = baton::v1::JobService::NewStub(channel);
    cluster_ = baton::v1::ClusterService::NewStub(channel);
    ctx_.out = &out_;
    ctx_.err = &err_;
    ctx_.jobs = jobs_.get();
    ctx_.cluster = cluster_.get();
    ctx_.coordinator = absl::StrCat("127.0.0.1:", port);
    ctx_.clock = &clock_;
    ctx_.tz = absl::UTCTimeZone();
    ctx_.sleep = [this](absl::Duration d) { clock_.Advance(d); };

    Job done = MakeJob("j-000001", "mnist", baton::v1::JOB_STATE_SUCCEEDED, absl::Hours(3));
    done.set_generation(2);
    done.set_message("Completed: reached max_steps");
    done.set_master_addr("10.0.0.5");
    done.set_master_port(29500);
    for (int rank = 0; rank < 2; ++rank) {
      auto* r = done.add_ranks();
      r->set_rank(rank);
      r->set_worker_id(rank == 0 ? "w-a" : "w-b");
      r->set_local_rank(0);
      r->set_local_world_size(1);
      r->set_pid(4100 + rank);
      r->mutable_exit()->set_exit_code(0);
    }
    done.mutable_result()->set_steps(1000);
    done.mutable_result()->set_initial_loss(2.303);
    (*done.mutable_result()->mutable_final_metrics())["loss"] = 0.0712;
    (*done.mutable_result()->mutable_final_metrics())["samples_per_sec"] = 5120;
    *done.mutable_result()->mutable_wall_time() = ToProto(absl::Seconds(133));
    *done.mutable_start_time() = ToProto(kT0 - absl::Hours(3) + absl::Seconds(2));
    *done.mutable_end_time() = ToProto(kT0 - absl::Hours(3) + absl::Seconds(135));
    auto* event = done.add_events();
    *event->mutable_time() = ToProto(kT0 - absl::Hours(3) + absl::Seconds(135));
    event->set_generation(2);
    event->set_from_state(baton::v1::JOB_STATE_RUNNING);
    event->set_to_state(baton::v1::JOB_STATE_SUCCEEDED);
    event->set_reason("Completed");
    event->set_message("reached max_steps");
    fake_.AddJob(done);

    Job running = MakeJob("j-000002", "resnet", baton::v1::JOB_STATE_RUNNING, absl::Minutes(12));
    running.set_generation(1);
    running.add_ranks()->set_worker_id("w-a");
    running.mutable_result()->set_steps(420);
    fake_.AddJob(running);
    Job failed = MakeJob("j-000003", "", baton::v1::JOB_STATE_FAILED, absl::Minutes(50));
    failed.set_message("rank 1 exited with code 3");
    fake_.AddJob(failed);
    fake_.AddJob(MakeJob("j-000004", "sweep-7", baton::v1::JOB_STATE_QUEUED, absl::Seconds(40)));

    std::vector<baton::v1::LogLine> lines;
    for (int i = 1; i <= 6; ++i) {
      baton::v1::LogLine line;
      line.set_seq(i);
      line.set_rank(i % 2);
      line.set_text(absl::StrCat("step ", i * 100, " loss ", 1.0 / i, "\n"));
      *line.mutable_time() = ToProto(kT0 - absl::Minutes(7 - i) + absl::Milliseconds(125));
      lines.push_back(line);
    }
    fake_.SetLogs(lines, /*breaks=*/0);

    baton::v1::GetVersionResponse version;
    version.set_version("0.15.0");
    version.set_protocol_version(3);
    version.set_min_worker_protocol_version(2);
    fake_.SetVersion(version);
  }

  void TearDown() override { server_->Shutdown(); }

  // Runs `command` with output `format`: "exit: N", then stdout and stderr.
  std::string Run(OutputFormat format, const std::function<int()>& command) {
    ctx_.format = format;
    out_.str("");
    err_.str("");
    const int rc = command();
    return absl::StrCat("exit: ", rc, "\n--- stdout\n", out_.str(), "--- stderr\n", err_.str());
  }

  FakeCoordinator fake_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<baton::v1::JobService::Stub> jobs_;
  std::unique_ptr<baton::v1::ClusterService::Stub> cluster_;
  FakeClock clock_{kT0};
  std::ostringstream out_;
  std::ostringstream err_;
  CommandContext ctx_;
};

TEST_F(GoldenTest, Jobs) {
  auto jobs = [&] { return ListJobs(ctx_); };
  ExpectGolden("jobs_table", Run(OutputFormat::kTable, jobs));
  ExpectGolden("jobs_wide", Run(OutputFormat::kWide, jobs));
  ExpectGolden("jobs_json", Run(OutputFormat::kJson, jobs));
  ExpectGolden("jobs_yaml", Run(OutputFormat::kYaml, jobs));
  ExpectGolden("jobs_name", Run(OutputFormat::kName, jobs));
  ListJobsArgs filtered;
  filtered.states = {baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_QUEUED};
  filtered.limit = 1;
  ExpectGolden("jobs_state_running_queued_limit_1",
               Run(OutputFormat::kTable, [&] { return ListJobs(ctx_, filtered); }));
  ctx_.color = true;
  ExpectGolden("jobs_table_color", Run(OutputFormat::kTable, jobs));
}

TEST_F(GoldenTest, Describe) {
  auto describe = [&] { return Describe(ctx_, "j-000001"); };
  ExpectGolden("describe_table", Run(OutputFormat::kTable, describe));
  ExpectGolden("describe_yaml", Run(OutputFormat::kYaml, describe));
  ExpectGolden("describe_json", Run(OutputFormat::kJson, describe));
  ExpectGolden("describe_name", Run(OutputFormat::kName, describe));
}

TEST_F(GoldenTest, Workers) {
  auto workers = [&] { return ListWorkers(ctx_); };
  ExpectGolden("workers_wide", Run(OutputFormat::kWide, workers));
  ExpectGolden("workers_yaml", Run(OutputFormat::kYaml, workers));
  ExpectGolden("workers_name", Run(OutputFormat::kName, workers));
}

TEST_F(GoldenTest, Logs) {
  LogsArgs tail{"j-000001"};
  tail.tail = 3;
  ExpectGolden("logs_tail_3", Run(OutputFormat::kTable, [&] { return Logs(ctx_, tail); }));
  LogsArgs stamped{"j-000001"};
  stamped.since_ago = absl::Minutes(3);
  stamped.timestamps = true;
  ExpectGolden("logs_since_3m_timestamps",
               Run(OutputFormat::kTable, [&] { return Logs(ctx_, stamped); }));
}

TEST_F(GoldenTest, Wait) {
  fake_.ScriptWatch({{{[] {
    baton::v1::JobUpdate u;
    u.mutable_snapshot()->set_id("j-000001");
    u.mutable_snapshot()->set_state(baton::v1::JOB_STATE_SUCCEEDED);
    return u;
  }()}}});
  ExpectGolden("wait_succeeded",
               Run(OutputFormat::kTable, [&] { return Wait(ctx_, {"j-000001"}); }));

  baton::v1::JobUpdate failed;
  failed.mutable_snapshot()->set_id("j-000003");
  failed.mutable_snapshot()->set_state(baton::v1::JOB_STATE_FAILED);
  fake_.ScriptWatch({{{failed}}});
  ExpectGolden("wait_failed", Run(OutputFormat::kTable, [&] { return Wait(ctx_, {"j-000003"}); }));

  baton::v1::JobUpdate running;
  running.mutable_snapshot()->set_id("j-000002");
  running.mutable_snapshot()->set_state(baton::v1::JOB_STATE_RUNNING);
  fake_.ScriptWatch(std::vector<WatchCall>(20, WatchCall{{running}}));
  ExpectGolden("wait_timeout", Run(OutputFormat::kTable, [&] {
                 return Wait(ctx_, {"j-000002", WaitCondition::kEnded, absl::Seconds(10)});
               }));
}

TEST_F(GoldenTest, Version) {
  auto version = [&] { return Version(ctx_); };
  ExpectGolden("version", Run(OutputFormat::kTable, version));
  ExpectGolden("version_json", Run(OutputFormat::kJson, version));
}

TEST_F(GoldenTest, CompletionBashHead) {
  std::vector<std::string> lines = absl::StrSplit(CompletionScript("bash"), '\n');
  lines.resize(std::min<size_t>(lines.size(), 12));
  ExpectGolden("completion_bash_head", absl::StrJoin(lines, "\n") + "\n");
}

TEST_F(GoldenTest, Help) {
  ExpectGolden("help", HelpText());
  ExpectGolden("help_jobs", HelpText("jobs"));
  ExpectGolden("help_wait", HelpText("wait"));
}

}  // namespace
}  // namespace baton::cli
