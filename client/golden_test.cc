// Golden tests of what the CLI prints: each command and output format is run against the
// in-process fake coordinator with a fixed clock (2024-05-01 12:00:00 UTC) and time zone
// (UTC), and its exit code, stdout and stderr are compared with
// client/testdata/golden/<name>.txt.
//
// After an intended change of the output, regenerate the files and review their diff:
//   BATON_UPDATE_GOLDEN=1 bazel run //client:golden_test

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "client/cli.h"
#include "client/commands.h"
#include "client/completion.h"
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

// A shared cluster: j-000002 runs on borrowed quota of queue team-a, j-000004 waits first
// in team-a with j-000002 shrinking for it, j-000005 waits second in team-b; j-000001 and
// j-000003 ran before the coordinator had queues.
TEST_F(GoldenTest, JobsInQueues) {
  Job running = MakeJob("j-000002", "resnet", baton::v1::JOB_STATE_RUNNING, absl::Minutes(12));
  running.set_generation(1);
  running.add_ranks()->set_worker_id("w-a");
  running.mutable_result()->set_steps(420);
  running.mutable_queueing()->set_queue("team-a");
  running.mutable_queueing()->set_borrowing(true);
  fake_.AddJob(running);
  Job first = MakeJob("j-000004", "sweep-7", baton::v1::JOB_STATE_QUEUED, absl::Seconds(40));
  first.mutable_spec()->set_priority("high");
  first.mutable_queueing()->set_queue("team-a");
  first.mutable_queueing()->set_priority(1000);
  first.mutable_queueing()->set_position(1);
  first.mutable_queueing()->add_making_room("j-000002 (shrinks from 4 to 2 workers)");
  fake_.AddJob(first);
  Job second = MakeJob("j-000005", "bert", baton::v1::JOB_STATE_QUEUED, absl::Seconds(10));
  second.mutable_queueing()->set_queue("team-b");
  second.mutable_queueing()->set_priority(-5);
  second.mutable_queueing()->set_position(2);
  fake_.AddJob(second);
  auto jobs = [&] { return ListJobs(ctx_); };
  ExpectGolden("jobs_queues_table", Run(OutputFormat::kTable, jobs));
  ExpectGolden("jobs_queues_wide", Run(OutputFormat::kWide, jobs));
}

// A job preempted once (Preempted, Requeued) that waits first in its queue while another
// shrinks and a borrower is preempted to make room for it.
TEST_F(GoldenTest, DescribeQueued) {
  Job job = MakeJob("j-000006", "bert-large", baton::v1::JOB_STATE_QUEUED, absl::Minutes(20));
  job.set_generation(1);
  job.set_message("Requeued: preempted to make room for j-000009 (reclaim)");
  job.mutable_spec()->set_slots_per_worker(2);
  job.mutable_spec()->set_queue("team-a");
  job.mutable_spec()->set_priority("high");
  job.mutable_spec()->set_preemptible(false);
  *job.mutable_start_time() = ToProto(kT0 - absl::Minutes(19));
  baton::v1::JobQueueing* q = job.mutable_queueing();
  q->set_queue("team-a");
  q->set_priority(1000);
  q->set_preemptions(1);
  q->set_position(1);
  q->set_pending_reason(
      "needs 4 slots (2 workers x 2); queue team-a at 8/8 slots of its quota; borrowing "
      "unavailable in cohort research (0 slots spare)");
  q->add_making_room("j-000004 (shrinks from 4 to 2 workers)");
  q->add_making_room("j-000007 (preempted: reclaim)");
  job.mutable_restarts()->set_planned(1);
  baton::v1::Failure* f = job.mutable_restarts()->add_failures();
  f->set_generation(1);
  f->set_failure_class(baton::v1::FAILURE_CLASS_PLANNED);
  f->set_reason("Preempted");
  f->set_step(300);
  f->set_cause("to make room for j-000009 (reclaim)");
  *f->mutable_fail_time() = ToProto(kT0 - absl::Minutes(2));
  *f->mutable_stopped_time() = ToProto(kT0 - absl::Minutes(2) + absl::Seconds(3));
  const struct {
    absl::Duration ago;
    baton::v1::JobState from, to;
    const char* reason;
    const char* message;
  } events[] = {
      {absl::Minutes(20), baton::v1::JOB_STATE_UNSPECIFIED, baton::v1::JOB_STATE_QUEUED,
       "Submitted", "queue team-a, priority 1000"},
      {absl::Minutes(19), baton::v1::JOB_STATE_QUEUED, baton::v1::JOB_STATE_RENDEZVOUS, "Admitted",
       "2 workers"},
      {absl::Minutes(2), baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_RESTARTING, "Preempted",
       "to make room for j-000009 (reclaim)"},
      {absl::Minutes(2) - absl::Seconds(3), baton::v1::JOB_STATE_RESTARTING,
       baton::v1::JOB_STATE_QUEUED, "Requeued", "resumes from its checkpoint when admitted"},
  };
  for (const auto& e : events) {
    baton::v1::JobEvent* event = job.add_events();
    *event->mutable_time() = ToProto(kT0 - e.ago);
    event->set_generation(1);
    event->set_from_state(e.from);
    event->set_to_state(e.to);
    event->set_reason(e.reason);
    event->set_message(e.message);
  }
  fake_.AddJob(job);
  ExpectGolden("describe_queued_table",
               Run(OutputFormat::kTable, [&] { return Describe(ctx_, "j-000006"); }));
}

TEST_F(GoldenTest, Queues) {
  baton::v1::ListQueuesResponse queues;
  queues.set_configured(true);
  queues.set_default_queue("team-a");
  auto add_queue = [&](const std::string& name, const std::string& cohort, int64_t nominal,
                       int64_t nominal_gpus, int64_t used, int64_t used_gpus) {
    baton::v1::QueueStatus* q = queues.add_queues();
    q->set_name(name);
    q->set_cohort(cohort);
    q->mutable_nominal()->set_slots(nominal);
    q->mutable_nominal()->set_gpus(nominal_gpus);
    q->mutable_used()->set_slots(used);
    q->mutable_used()->set_gpus(used_gpus);
    q->mutable_borrowed()->set_slots(std::max<int64_t>(used - nominal, 0));
    q->mutable_borrowed()->set_gpus(std::max<int64_t>(used_gpus - nominal_gpus, 0));
    return q;
  };
  baton::v1::QueueStatus* a = add_queue("team-a", "research", 8, 0, 10, 0);
  a->set_pending_jobs(2);
  a->set_admitted_jobs(3);
  a->set_preemptions(1);
  a->set_shrinks(2);
  a->add_users("alice");
  a->add_users("bob");
  baton::v1::QueueStatus* b = add_queue("team-b", "research", 8, 0, 1, 0);
  b->set_pending_jobs(1);
  b->set_admitted_jobs(1);
  b->add_users("*");
  baton::v1::QueueStatus* gpu = add_queue("vision", "", 16, 8, 8, 4);
  gpu->set_admitted_jobs(1);
  gpu->add_users("carol");
  for (const auto& [name, value] :
       std::vector<std::pair<std::string, int>>{{"high", 1000}, {"normal", 100}, {"low", 0}}) {
    baton::v1::PriorityClass* c = queues.add_priority_classes();
    c->set_name(name);
    c->set_value(value);
  }
  fake_.SetQueues(queues);
  auto list = [&] { return ListQueues(ctx_); };
  ExpectGolden("queues_table", Run(OutputFormat::kTable, list));
  ExpectGolden("queues_wide", Run(OutputFormat::kWide, list));
  ExpectGolden("queues_json", Run(OutputFormat::kJson, list));
  ExpectGolden("queues_yaml", Run(OutputFormat::kYaml, list));
  ExpectGolden("queues_name", Run(OutputFormat::kName, list));

  fake_.SetQueues({});
  ExpectGolden("queues_not_configured", Run(OutputFormat::kTable, list));
  fake_.SetQueues({}, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  // The address varies from run to run.
  std::string old = Run(OutputFormat::kTable, list);
  old.replace(old.find(ctx_.coordinator), ctx_.coordinator.size(), "HOST:PORT");
  ExpectGolden("queues_unimplemented", old);
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
  ExpectGolden("help_queues", HelpText("queues"));
}

}  // namespace
}  // namespace baton::cli
