// The CLI's commands against an in-process fake coordinator on 127.0.0.1:0.

#include "client/commands.h"

#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "baton/v1/job_service.grpc.pb.h"
#include "client/testing/fake_coordinator.h"
#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::cli {
namespace {

using baton::v1::Job;
using baton::v1::JobUpdate;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

const absl::Time kT0 = absl::FromUnixSeconds(1714564800);

// A port on 127.0.0.1 that nobody listens on (bound, then closed).
int UnusedPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  EXPECT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  socklen_t len = sizeof(addr);
  EXPECT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  close(fd);
  return ntohs(addr.sin_port);
}

std::string TempDir() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  return tmp != nullptr ? tmp : "/tmp";
}

JobUpdate Snapshot(baton::v1::JobState state) {
  JobUpdate u;
  Job* job = u.mutable_snapshot();
  job->set_id("j-000001");
  job->set_state(state);
  job->mutable_spec()->mutable_budget()->set_max_steps(100);
  return u;
}

JobUpdate Event(int64_t seq, baton::v1::JobState from, baton::v1::JobState to,
                const std::string& reason) {
  JobUpdate u;
  u.set_seq(seq);
  u.mutable_event()->set_from_state(from);
  u.mutable_event()->set_to_state(to);
  u.mutable_event()->set_reason(reason);
  *u.mutable_event()->mutable_time() = ToProto(kT0);
  return u;
}

JobUpdate Metric(int64_t seq, int64_t step, double loss) {
  JobUpdate u;
  u.set_seq(seq);
  u.mutable_metric()->set_step(step);
  u.mutable_metric()->set_generation(1);
  *u.mutable_metric()->mutable_time() = ToProto(kT0 + absl::Seconds(step));
  (*u.mutable_metric()->mutable_values())["loss"] = loss;
  return u;
}

Job FinalJob(baton::v1::JobState state, const std::string& message) {
  Job job;
  job.set_id("j-000001");
  job.set_state(state);
  job.set_message(message);
  job.mutable_spec()->mutable_budget()->set_max_steps(100);
  job.mutable_result()->set_steps(100);
  (*job.mutable_result()->mutable_final_metrics())["loss"] = 0.125;
  (*job.mutable_result()->mutable_final_metrics())["accuracy"] = 0.975;
  *job.mutable_result()->mutable_wall_time() = ToProto(absl::Seconds(42));
  return job;
}

class CommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    int port = 0;
    server_ = ServeFakeCoordinator(fake_, &port);
    ASSERT_NE(server_, nullptr);
    ASSERT_NE(port, 0);
    Connect(absl::StrCat("127.0.0.1:", port));

    job_file_ = TempDir() + "/job.yaml";
    std::ofstream(job_file_) << "name: mnist\n"
                                "trainer: {model: mlp, dataset: mnist, data_dir: data}\n"
                                "workers: {min: 2}\n"
                                "budget: {max_steps: 100}\n";
  }

  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  void Connect(const std::string& address) {
    auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    jobs_ = baton::v1::JobService::NewStub(channel);
    cluster_ = baton::v1::ClusterService::NewStub(channel);
    ctx_.out = &out_;
    ctx_.err = &err_;
    ctx_.jobs = jobs_.get();
    ctx_.cluster = cluster_.get();
    ctx_.coordinator = address;
    ctx_.clock = &clock_;
    ctx_.tz = absl::UTCTimeZone();
    ctx_.rpc_timeout = absl::Seconds(10);
    ctx_.sleep = [this](absl::Duration d) { sleeps_.push_back(d); };
  }

  FakeCoordinator fake_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<baton::v1::JobService::Stub> jobs_;
  std::unique_ptr<baton::v1::ClusterService::Stub> cluster_;
  FakeClock clock_{kT0};
  std::ostringstream out_;
  std::ostringstream err_;
  std::vector<absl::Duration> sleeps_;
  CommandContext ctx_;
  std::string job_file_;
};

TEST_F(CommandsTest, SubmitPrintsIdAndSendsParsedSpec) {
  EXPECT_EQ(Submit(ctx_, {job_file_, {"workers.min=3"}, /*wait=*/false}), kExitOk);
  EXPECT_EQ(out_.str(), "j-000001\n");
  EXPECT_EQ(err_.str(), "");
  ASSERT_EQ(fake_.submitted().size(), 1u);
  const baton::v1::JobSpec spec = fake_.submitted()[0];
  EXPECT_EQ(spec.workers().min(), 3);
  EXPECT_EQ(spec.trainer().data_dir(), TempDir() + "/data");  // resolved, not defaulted
  EXPECT_EQ(spec.trainer().batch_size(), 0);
}

TEST_F(CommandsTest, SubmitWaitSucceeded) {
  fake_.AddJob(FinalJob(baton::v1::JOB_STATE_SUCCEEDED, "reached max_steps"));
  fake_.ScriptWatch({{{Snapshot(baton::v1::JOB_STATE_QUEUED),
                       Event(1, baton::v1::JOB_STATE_QUEUED, baton::v1::JOB_STATE_RUNNING,
                             "Started"),
                       Metric(2, 50, 0.5), Metric(3, 100, 0.125),
                       Event(4, baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_SUCCEEDED,
                             "Completed"),
                       Snapshot(baton::v1::JOB_STATE_SUCCEEDED)}}});
  EXPECT_EQ(Submit(ctx_, {job_file_, {}, /*wait=*/true}), kExitOk);
  EXPECT_EQ(err_.str(), "");
  EXPECT_EQ(out_.str(),
            "j-000001\n"
            "[12:00:00] QUEUED -> RUNNING  Started\n"
            "step 50/100 (50%)  loss 0.5  RUNNING\n"
            "[12:00:00] RUNNING -> SUCCEEDED  Completed\n"
            "Job j-000001 SUCCEEDED\n"
            "  steps:      100/100\n"
            "  loss:       0.125\n"
            "  accuracy:   97.5%\n"
            "  wall time:  42s\n");
  EXPECT_THAT(fake_.watch_after_seqs(), ElementsAre(0));
}

TEST_F(CommandsTest, SubmitWaitFailedExitsThreeWithMessage) {
  fake_.AddJob(FinalJob(baton::v1::JOB_STATE_FAILED, "rank 1 exited with code 3"));
  fake_.ScriptWatch({{{Snapshot(baton::v1::JOB_STATE_RUNNING),
                       Event(1, baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_FAILED,
                             "RankExited"),
                       Snapshot(baton::v1::JOB_STATE_FAILED)}}});
  EXPECT_EQ(Submit(ctx_, {job_file_, {}, /*wait=*/true}), kExitJobNotSuccessful);
  EXPECT_THAT(out_.str(), HasSubstr("Job j-000001 FAILED\n"));
  EXPECT_EQ(err_.str(), "baton: job j-000001 FAILED: rank 1 exited with code 3\n");
}

TEST_F(CommandsTest, WatchResumesAfterBrokenStreamFromLastSeq) {
  fake_.AddJob(FinalJob(baton::v1::JOB_STATE_SUCCEEDED, ""));
  fake_.ScriptWatch({
      {{Snapshot(baton::v1::JOB_STATE_RUNNING), Metric(5, 10, 1.0), Metric(6, 20, 0.9)},
       grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator restarting")},
      {{}, grpc::Status(grpc::StatusCode::UNAVAILABLE, "still down")},
      {{Snapshot(baton::v1::JOB_STATE_RUNNING), Metric(7, 30, 0.8),
        Event(8, baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_SUCCEEDED, "Completed"),
        Snapshot(baton::v1::JOB_STATE_SUCCEEDED)}},
  });
  EXPECT_EQ(Submit(ctx_, {job_file_, {}, /*wait=*/true}), kExitOk) << err_.str();
  EXPECT_THAT(fake_.watch_after_seqs(), ElementsAre(0, 6, 6));
  // Backoff grows while nothing arrives.
  EXPECT_THAT(sleeps_, ElementsAre(absl::Milliseconds(500), absl::Seconds(1)));
}

TEST_F(CommandsTest, WatchGivesUpAfterBoundedRetries) {
  ctx_.retry.max_attempts = 2;
  fake_.ScriptWatch({});  // every call: UNAVAILABLE
  EXPECT_EQ(Submit(ctx_, {job_file_, {}, /*wait=*/true}), kExitUnreachable);
  EXPECT_THAT(fake_.watch_after_seqs(), ElementsAre(0, 0, 0));
  EXPECT_THAT(err_.str(), StartsWith("baton: cannot reach the coordinator at 127.0.0.1:"));
}

// A submit that cannot reach the coordinator is retried with the same request id, so the
// coordinator creates the job at most once; each invocation has its own id.
TEST_F(CommandsTest, SubmitRetriesWithOneRequestId) {
  fake_.FailNextSubmits({grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset"),
                         grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset")});
  EXPECT_EQ(Submit(ctx_, {job_file_, {}, false}), kExitOk);
  EXPECT_EQ(out_.str(), "j-000001\n");
  EXPECT_THAT(sleeps_, ElementsAre(absl::Milliseconds(500), absl::Seconds(1)));
  std::vector<std::string> ids = fake_.request_ids();
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0].size(), 32u);
  EXPECT_EQ(ids[1], ids[0]);
  EXPECT_EQ(ids[2], ids[0]);

  EXPECT_EQ(Submit(ctx_, {job_file_, {}, false}), kExitOk);
  ids = fake_.request_ids();
  ASSERT_EQ(ids.size(), 4u);
  EXPECT_NE(ids[3], ids[0]);
}

TEST_F(CommandsTest, SubmitRejectedByServerNamesTheFile) {
  fake_.FailSubmit(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                                "trainer.data_dir: 'x' is relative; must be an absolute "
                                "path"));
  EXPECT_EQ(Submit(ctx_, {job_file_, {}, false}), kExitFailure);
  EXPECT_EQ(err_.str(), absl::StrCat("baton: invalid job file ", job_file_,
                                     ": trainer.data_dir: 'x' is relative; must be an "
                                     "absolute path\n"));
  EXPECT_EQ(out_.str(), "");
}

TEST_F(CommandsTest, LocalParseErrorNeverReachesTheServer) {
  EXPECT_EQ(Submit(ctx_, {job_file_, {"workers.mn=1"}, false}), kExitFailure);
  EXPECT_EQ(err_.str(), absl::StrCat("baton: invalid job file ", job_file_,
                                     ": --set workers.mn=1: workers.mn: unknown field; "
                                     "allowed: min, max\n"));
  EXPECT_TRUE(fake_.submitted().empty());
}

TEST_F(CommandsTest, DescribeUnknownJob) {
  EXPECT_EQ(Describe(ctx_, "j-404"), kExitFailure);
  EXPECT_EQ(err_.str(), "baton: job j-404 not found\n");
  EXPECT_EQ(out_.str(), "");
}

TEST_F(CommandsTest, DescribeAndJobsAsJson) {
  fake_.AddJob(FinalJob(baton::v1::JOB_STATE_SUCCEEDED, ""));
  EXPECT_EQ(Describe(ctx_, "j-000001"), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("State:       SUCCEEDED\n"));
  out_.str("");
  ctx_.format = OutputFormat::kJson;
  EXPECT_EQ(ListJobs(ctx_), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("{\n \"jobs\": [\n"));
  EXPECT_THAT(out_.str(), HasSubstr("\"id\": \"j-000001\""));
}

TEST_F(CommandsTest, JobsFollowsEveryPage) {
  for (const std::string id : {"j-000001", "j-000002", "j-000003"}) {
    Job job = FinalJob(baton::v1::JOB_STATE_SUCCEEDED, "");
    job.set_id(id);
    fake_.AddJob(job);
  }
  ctx_.format = OutputFormat::kJson;
  EXPECT_EQ(ListJobs(ctx_), kExitOk);
  EXPECT_EQ(fake_.list_calls(), 3);
  for (const std::string id : {"j-000001", "j-000002", "j-000003"}) {
    EXPECT_THAT(out_.str(), HasSubstr(absl::StrCat("\"id\": \"", id, "\"")));
  }
}

TEST_F(CommandsTest, ProfileWritesTheMergedTraceAndSaysWhere) {
  baton::v1::ProfileJobResponse response;
  response.set_job_id("j-000002");
  response.set_generation(3);
  for (int rank : {0, 1}) {
    baton::v1::RankTrace* t = response.add_traces();
    t->set_rank(rank);
    t->set_trace_json(absl::StrCat("{\"traceEvents\":[{\"name\":\"x\",\"ph\":\"X\",\"ts\":1,",
                                   "\"dur\":1,\"pid\":", rank, ",\"tid\":0}]}"));
  }
  fake_.ScriptProfile(response, grpc::Status::OK);
  ProfileArgs args;
  args.job_id = "j-000002";
  args.steps = 3;
  args.out = TempDir() + "/merged.json";
  args.timeout = absl::Seconds(30);
  ASSERT_EQ(Profile(ctx_, args), kExitOk) << err_.str();
  ASSERT_EQ(fake_.profile_requests().size(), 1u);
  const baton::v1::ProfileJobRequest sent = fake_.profile_requests()[0];
  EXPECT_EQ(sent.job_id(), "j-000002");
  EXPECT_EQ(sent.steps(), 3);
  EXPECT_EQ(sent.ranks_size(), 0);  // Every rank.
  EXPECT_EQ(sent.timeout().seconds(), 30);
  EXPECT_EQ(out_.str(), "wrote the trace of 3 steps of job j-000002 generation 3, ranks 0,1, to " +
                            args.out +
                            "\nopen it in https://ui.perfetto.dev or chrome://tracing\n");
  std::ifstream in(args.out);
  const std::string merged((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_THAT(merged, HasSubstr("\"args\":{\"name\":\"rank 0\"}"));
  EXPECT_THAT(merged, HasSubstr("\"args\":{\"name\":\"rank 1\"}"));
  EXPECT_THAT(merged, HasSubstr("\"ranks\":[0,1]"));

  out_.str("");
  ctx_.format = OutputFormat::kJson;
  ASSERT_EQ(Profile(ctx_, args), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"file\": \"" + args.out + "\""));
  EXPECT_THAT(out_.str(), HasSubstr("\"job_id\": \"j-000002\""));
  ctx_.format = OutputFormat::kTable;

  args.rank = 1;
  args.timeout = absl::ZeroDuration();
  ASSERT_EQ(Profile(ctx_, args), kExitOk);
  EXPECT_THAT(fake_.profile_requests()[2].ranks(), ElementsAre(1));
  EXPECT_FALSE(fake_.profile_requests()[2].has_timeout());  // The coordinator's default.
}

TEST_F(CommandsTest, ProfileErrorsNameTheMissingRanks) {
  fake_.ScriptProfile({}, grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                                       "not every rank sent its trace of job j-000002 in time "
                                       "(missing: rank 1 on worker w2)"));
  ProfileArgs args;
  args.job_id = "j-000002";
  args.out = TempDir() + "/never.json";
  EXPECT_EQ(Profile(ctx_, args), kExitFailure);
  EXPECT_EQ(err_.str(),
            "baton: cannot profile job j-000002: not every rank sent its trace of job j-000002 "
            "in time (missing: rank 1 on worker w2)\n");
  EXPECT_FALSE(std::ifstream(args.out).good());

  err_.str("");
  fake_.ScriptProfile({}, grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                                       "job j-000002 runs a command; profiling needs the "
                                       "built-in trainer"));
  EXPECT_EQ(Profile(ctx_, args), kExitFailure);
  EXPECT_EQ(err_.str(),
            "baton: cannot profile job j-000002: job j-000002 runs a command; profiling needs "
            "the built-in trainer\n");
}

TEST_F(CommandsTest, CancelAndWorkers) {
  Job running = FinalJob(baton::v1::JOB_STATE_RUNNING, "");
  running.set_id("j-000002");
  fake_.AddJob(running);
  fake_.AddJob(FinalJob(baton::v1::JOB_STATE_SUCCEEDED, ""));
  EXPECT_EQ(Cancel(ctx_, "j-000002"), kExitOk);
  EXPECT_EQ(out_.str(), "job j-000002 cancelled\n");
  EXPECT_EQ(Cancel(ctx_, "j-000001"), kExitFailure);
  EXPECT_EQ(err_.str(), "baton: cannot cancel job j-000001: job is already SUCCEEDED\n");

  out_.str("");
  EXPECT_EQ(ListWorkers(ctx_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("w-a   10.0.0.5   4       0      READY   -"));
}

baton::v1::ListQueuesResponse TwoQueues() {
  baton::v1::ListQueuesResponse queues;
  queues.set_configured(true);
  queues.set_default_queue("team-a");
  for (const std::string name : {"team-a", "team-b"}) {
    baton::v1::QueueStatus* q = queues.add_queues();
    q->set_name(name);
    q->set_cohort("research");
    q->mutable_nominal()->set_slots(4);
  }
  queues.mutable_queues(0)->mutable_used()->set_slots(6);
  queues.mutable_queues(0)->mutable_borrowed()->set_slots(2);
  queues.mutable_queues(0)->set_admitted_jobs(2);
  queues.mutable_queues(1)->set_pending_jobs(1);
  baton::v1::PriorityClass* high = queues.add_priority_classes();
  high->set_name("high");
  high->set_value(1000);
  return queues;
}

TEST_F(CommandsTest, QueuesTableAndFormats) {
  fake_.SetQueues(TwoQueues());
  EXPECT_EQ(ListQueues(ctx_), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(),
            "NAME     COHORT     QUOTA     USED      BORROWED   PENDING   ADMITTED   PREEMPTED\n"
            "team-a   research   4 slots   6 slots   2 slots    0         2          0\n"
            "team-b   research   4 slots   0 slots   -          1         0          0\n"
            "\n"
            "Default queue:     team-a\n"
            "Priority classes:  high (1000)\n");
  EXPECT_EQ(err_.str(), "");

  out_.str("");
  ctx_.format = OutputFormat::kName;
  EXPECT_EQ(ListQueues(ctx_), kExitOk);
  EXPECT_EQ(out_.str(), "team-a\nteam-b\n");

  out_.str("");
  ctx_.format = OutputFormat::kJson;
  EXPECT_EQ(ListQueues(ctx_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"configured\": true"));
  EXPECT_THAT(out_.str(), HasSubstr("\"borrowed\": {\n    \"slots\": \"2\""));
}

TEST_F(CommandsTest, QueuesOnACoordinatorWithoutQueues) {
  EXPECT_EQ(ListQueues(ctx_), kExitOk);
  EXPECT_EQ(out_.str(),
            "this coordinator has no queues: it starts jobs first come, first served (start it "
            "with --queue_file)\n");
  EXPECT_EQ(err_.str(), "");
  // Scripts get the document, `configured` false.
  out_.str("");
  ctx_.format = OutputFormat::kJson;
  EXPECT_EQ(ListQueues(ctx_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"configured\": false"));
}

TEST_F(CommandsTest, QueuesOnACoordinatorOlderThanQueues) {
  fake_.SetQueues({}, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  EXPECT_EQ(ListQueues(ctx_), kExitFailure);
  EXPECT_EQ(out_.str(), "");
  EXPECT_EQ(err_.str(),
            absl::StrCat("baton: cannot list queues: the coordinator at ", ctx_.coordinator,
                         " predates queues (it has no ListQueues): it starts jobs "
                         "first come, first served\n"));

  err_.str("");
  fake_.SetQueues({}, grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "user eve may not read"));
  EXPECT_EQ(ListQueues(ctx_), kExitFailure);
  EXPECT_EQ(err_.str(), "baton: not allowed: user eve may not read\n");
}

TEST_F(CommandsTest, JobsAndDescribeShowTheQueue) {
  Job queued = FinalJob(baton::v1::JOB_STATE_QUEUED, "");
  queued.clear_result();
  queued.mutable_queueing()->set_queue("team-a");
  queued.mutable_queueing()->set_priority(100);
  queued.mutable_queueing()->set_position(3);
  queued.mutable_queueing()->set_pending_reason("needs 2 slots (2 workers x 1)");
  fake_.AddJob(queued);
  EXPECT_EQ(ListJobs(ctx_), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), StartsWith("ID         NAME   STATE    QUEUE    PRIO   POS   WORKERS"));
  EXPECT_THAT(out_.str(), HasSubstr("j-000001   -      QUEUED   team-a   100    3     0/0"));

  out_.str("");
  EXPECT_EQ(Describe(ctx_, "j-000001"), kExitOk) << err_.str();
  EXPECT_THAT(out_.str(), HasSubstr("\nQueue:     team-a\n"
                                    "Priority:  100\n"
                                    "Position:  3 in queue\n"
                                    "Waiting:   needs 2 slots (2 workers x 1)\n"
                                    "\nSpec:\n"));
}

TEST_F(CommandsTest, LogsPrefixRanksAndFollowResumes) {
  std::vector<baton::v1::LogLine> lines;
  for (int i = 1; i <= 3; ++i) {
    baton::v1::LogLine line;
    line.set_seq(i);
    line.set_rank(i % 2);
    line.set_text(absl::StrCat("line ", i, "\n"));
    lines.push_back(line);
  }
  fake_.SetLogs(lines, /*breaks=*/1);  // the first call breaks after one line
  EXPECT_EQ(Logs(ctx_, {"j-000001", -1, /*follow=*/true}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "[rank 1] line 1\n[rank 0] line 2\n[rank 1] line 3\n");
  ASSERT_EQ(fake_.logs_requests().size(), 2u);
  EXPECT_EQ(fake_.logs_requests()[1].after_seq(), 1);
  EXPECT_TRUE(fake_.logs_requests()[1].follow());

  out_.str("");
  EXPECT_EQ(Logs(ctx_, {"j-000001", 1, false}), kExitOk);
  EXPECT_EQ(out_.str(), "line 1\nline 2\nline 3\n");  // the fake ignores rank filtering
  EXPECT_EQ(fake_.logs_requests().back().rank(), 1);
}

TEST_F(CommandsTest, LogsNeutraliseTerminalEscapesOnATerminal) {
  baton::v1::LogLine line;
  line.set_seq(1);
  line.set_text("ok \x1b]0;pwned\x07 \x1b[2J\r\xc2\x9b" "31m\tdone\n");
  fake_.SetLogs({line}, /*breaks=*/0);
  ctx_.tty = true;
  EXPECT_EQ(Logs(ctx_, {"j-000001", 0, false}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "ok ^[]0;pwned^G ^[[2J^M<U+009B>31m\tdone\n");
  // Piped to a file or another program, the bytes are the job's own.
  out_.str("");
  ctx_.tty = false;
  EXPECT_EQ(Logs(ctx_, {"j-000001", 0, false}), kExitOk);
  EXPECT_EQ(out_.str(), "ok \x1b]0;pwned\x07 \x1b[2J\r\xc2\x9b" "31m\tdone\n");
}

TEST_F(CommandsTest, UnreachableCoordinatorIsOneLineWithHint) {
  const std::string address = absl::StrCat("127.0.0.1:", UnusedPort());
  Connect(address);
  EXPECT_EQ(ListJobs(ctx_), kExitUnreachable);
  EXPECT_THAT(err_.str(),
              MatchesRegex("baton: cannot reach the coordinator at 127\\.0\\.0\\.1:[0-9]+ "
                           "\\([^\n]+\\); is baton-coordinator running\\? Set --coordinator "
                           "or BATON_COORDINATOR \\(and for TLS --ca or --context\\)\\.\n"));
  EXPECT_THAT(err_.str(), HasSubstr(absl::StrCat("at ", address, " (")));
  EXPECT_EQ(out_.str(), "");
}

TEST_F(CommandsTest, JobsFilterByStateAndLimit) {
  for (const auto& [id, state] : std::vector<std::pair<std::string, baton::v1::JobState>>{
           {"j-000001", baton::v1::JOB_STATE_RUNNING},
           {"j-000002", baton::v1::JOB_STATE_FAILED},
           {"j-000003", baton::v1::JOB_STATE_QUEUED},
           {"j-000004", baton::v1::JOB_STATE_RUNNING}}) {
    Job job = FinalJob(state, "");
    job.set_id(id);
    fake_.AddJob(job);
  }
  ctx_.format = OutputFormat::kName;
  ListJobsArgs args;
  args.states = {baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_QUEUED};
  EXPECT_EQ(ListJobs(ctx_, args), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "j-000001\nj-000003\nj-000004\n");
  ASSERT_FALSE(fake_.list_requests().empty());
  EXPECT_THAT(fake_.list_requests().back().states(),
              ElementsAre(baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_QUEUED));

  out_.str("");
  args.limit = 2;
  EXPECT_EQ(ListJobs(ctx_, args), kExitOk);
  EXPECT_EQ(out_.str(), "j-000001\nj-000003\n");
  EXPECT_EQ(fake_.list_requests().back().limit(), 2);
}

TEST_F(CommandsTest, JsonKeepsZeroValuesAndYamlIsTheSameDocument) {
  Job job = FinalJob(baton::v1::JOB_STATE_SUCCEEDED, "");
  job.add_ranks()->mutable_exit()->set_exit_code(0);
  fake_.AddJob(job);
  ctx_.format = OutputFormat::kJson;
  EXPECT_EQ(Describe(ctx_, "j-000001"), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"exit_code\": 0"));
  EXPECT_THAT(out_.str(), HasSubstr("\"final_metrics\": {"));
  out_.str("");
  ctx_.format = OutputFormat::kYaml;
  EXPECT_EQ(Describe(ctx_, "j-000001"), kExitOk);
  EXPECT_THAT(out_.str(), StartsWith("id: j-000001\n"));
  EXPECT_THAT(out_.str(), HasSubstr("exit_code: 0\n"));
  EXPECT_THAT(out_.str(), HasSubstr("state: JOB_STATE_SUCCEEDED\n"));
}

std::vector<baton::v1::LogLine> TimedLines(int n) {
  std::vector<baton::v1::LogLine> lines;
  for (int i = 1; i <= n; ++i) {
    baton::v1::LogLine line;
    line.set_seq(i);
    line.set_rank(0);
    line.set_text(absl::StrCat("line ", i, "\n"));
    *line.mutable_time() = ToProto(kT0 + absl::Minutes(i) + absl::Milliseconds(250));
    lines.push_back(line);
  }
  return lines;
}

TEST_F(CommandsTest, LogsTailSinceAndTimestamps) {
  fake_.SetLogs(TimedLines(5), /*breaks=*/0);
  LogsArgs args;
  args.job_id = "j-000001";
  args.rank = 0;
  args.tail = 2;
  args.timestamps = true;
  EXPECT_EQ(Logs(ctx_, args), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(),
            "2024-05-01T12:04:00.25Z line 4\n"
            "2024-05-01T12:05:00.25Z line 5\n");
  EXPECT_EQ(fake_.logs_requests().back().tail(), 2);
  EXPECT_FALSE(fake_.logs_requests().back().has_since());

  // --since 3m at kT0 + 5m: lines from kT0 + 2m on.
  out_.str("");
  clock_.Advance(absl::Minutes(5));
  args = LogsArgs{"j-000001", 0, false};
  args.since_ago = absl::Minutes(3);
  EXPECT_EQ(Logs(ctx_, args), kExitOk);
  EXPECT_EQ(out_.str(), "line 2\nline 3\nline 4\nline 5\n");
  EXPECT_EQ(FromProto(fake_.logs_requests().back().since()), kT0 + absl::Minutes(2));

  out_.str("");
  args.since_ago = absl::ZeroDuration();
  args.since_time = kT0 + absl::Minutes(4);
  EXPECT_EQ(Logs(ctx_, args), kExitOk);
  EXPECT_EQ(out_.str(), "line 4\nline 5\n");
}

TEST_F(CommandsTest, LogsTailWithFollowIsNotResentOnResume) {
  fake_.SetLogs(TimedLines(5), /*breaks=*/1);  // the first call breaks after one line
  LogsArgs args{"j-000001", 0, /*follow=*/true};
  args.tail = 3;
  EXPECT_EQ(Logs(ctx_, args), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "line 3\nline 4\nline 5\n");
  ASSERT_EQ(fake_.logs_requests().size(), 2u);
  EXPECT_EQ(fake_.logs_requests()[0].tail(), 3);
  EXPECT_EQ(fake_.logs_requests()[1].tail(), 0);
  EXPECT_EQ(fake_.logs_requests()[1].after_seq(), 3);
}

TEST_F(CommandsTest, WaitSucceeded) {
  fake_.AddJob(FinalJob(baton::v1::JOB_STATE_SUCCEEDED, ""));
  fake_.ScriptWatch(
      {{{Snapshot(baton::v1::JOB_STATE_RUNNING),
         Event(1, baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_SUCCEEDED, "Completed")}}});
  EXPECT_EQ(Wait(ctx_, {"j-000001"}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "j-000001 SUCCEEDED\n");
  EXPECT_EQ(err_.str(), "");
}

TEST_F(CommandsTest, WaitForSucceededOnAFailedJobExitsThree) {
  fake_.AddJob(FinalJob(baton::v1::JOB_STATE_FAILED, "rank 1 exited with code 3"));
  fake_.ScriptWatch({{{Snapshot(baton::v1::JOB_STATE_FAILED)}}});
  EXPECT_EQ(Wait(ctx_, {"j-000001"}), kExitJobNotSuccessful);
  EXPECT_EQ(out_.str(), "j-000001 FAILED: rank 1 exited with code 3\n");
  EXPECT_EQ(err_.str(), "baton: job j-000001 ended FAILED; it will not succeed\n");

  // --for failed / ended are met by the same job.
  out_.str("");
  err_.str("");
  fake_.ScriptWatch(
      {{{Snapshot(baton::v1::JOB_STATE_FAILED)}}, {{Snapshot(baton::v1::JOB_STATE_FAILED)}}});
  EXPECT_EQ(Wait(ctx_, {"j-000001", WaitCondition::kFailed}), kExitOk);
  EXPECT_EQ(Wait(ctx_, {"j-000001", WaitCondition::kEnded}), kExitOk);
  EXPECT_EQ(err_.str(), "");
}

TEST_F(CommandsTest, WaitForRunningStopsWatchingOnceRunning) {
  fake_.ScriptWatch(
      {{{Snapshot(baton::v1::JOB_STATE_QUEUED),
         Event(1, baton::v1::JOB_STATE_QUEUED, baton::v1::JOB_STATE_RENDEZVOUS, ""),
         Event(2, baton::v1::JOB_STATE_RENDEZVOUS, baton::v1::JOB_STATE_RUNNING, "")}}});
  EXPECT_EQ(Wait(ctx_, {"j-000001", WaitCondition::kRunning}), kExitOk) << err_.str();
  EXPECT_EQ(out_.str(), "j-000001 RUNNING\n");
}

TEST_F(CommandsTest, WaitResumesABrokenWatch) {
  fake_.AddJob(FinalJob(baton::v1::JOB_STATE_SUCCEEDED, ""));
  fake_.ScriptWatch({
      {{Snapshot(baton::v1::JOB_STATE_RUNNING), Metric(4, 10, 1.0)},
       grpc::Status(grpc::StatusCode::UNAVAILABLE, "coordinator restarting")},
      {{Event(5, baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_SUCCEEDED, "Completed")}},
  });
  EXPECT_EQ(Wait(ctx_, {"j-000001"}), kExitOk) << err_.str();
  EXPECT_THAT(fake_.watch_after_seqs(), ElementsAre(0, 4));
  EXPECT_THAT(sleeps_, ElementsAre(absl::Milliseconds(500)));
}

TEST_F(CommandsTest, WaitTimesOutOnTheInjectedClock) {
  // Every watch ends while the job runs; the retries' sleeps advance the fake clock.
  ctx_.sleep = [this](absl::Duration d) {
    sleeps_.push_back(d);
    clock_.Advance(d);
  };
  std::vector<WatchCall> calls(20, WatchCall{{Snapshot(baton::v1::JOB_STATE_RUNNING)}});
  fake_.ScriptWatch(calls);
  EXPECT_EQ(Wait(ctx_, {"j-000001", WaitCondition::kSucceeded, absl::Seconds(3)}), kExitTimeout);
  EXPECT_EQ(out_.str(), "j-000001 RUNNING\n");
  EXPECT_EQ(err_.str(),
            "baton: timed out after 3.0s waiting for job j-000001 to succeed (it is RUNNING)\n");
  EXPECT_EQ(clock_.Now(), kT0 + absl::Seconds(3));
}

TEST_F(CommandsTest, WaitForAMissingJob) {
  fake_.ScriptWatch({{{}, grpc::Status(grpc::StatusCode::NOT_FOUND, "job j-404 not found")}});
  EXPECT_EQ(Wait(ctx_, {"j-404"}), kExitFailure);
  EXPECT_EQ(err_.str(), "baton: job j-404 not found\n");
}

TEST_F(CommandsTest, VersionShowsClientAndServer) {
  baton::v1::GetVersionResponse version;
  version.set_version("0.15.0");
  version.set_protocol_version(3);
  version.set_min_worker_protocol_version(2);
  fake_.SetVersion(version);
  EXPECT_EQ(Version(ctx_), kExitOk);
  EXPECT_EQ(out_.str(),
            "Client: 0.15.0\n"
            "Server: 0.15.0 (worker protocol 3, accepts workers from protocol 2)\n");
  out_.str("");
  ctx_.format = OutputFormat::kJson;
  EXPECT_EQ(Version(ctx_), kExitOk);
  EXPECT_THAT(out_.str(), HasSubstr("\"protocol_version\": 3"));

  out_.str("");
  ctx_.format = OutputFormat::kTable;
  fake_.SetVersion({}, grpc::Status(grpc::StatusCode::UNIMPLEMENTED, ""));
  EXPECT_EQ(Version(ctx_), kExitOk);
  EXPECT_EQ(out_.str(), "Client: 0.15.0\nServer: unknown (a coordinator older than 0.15)\n");
}

TEST_F(CommandsTest, VersionWithoutACoordinatorStillShowsTheClient) {
  Connect(absl::StrCat("127.0.0.1:", UnusedPort()));
  EXPECT_EQ(Version(ctx_), kExitUnreachable);
  EXPECT_EQ(out_.str(), "Client: 0.15.0\n");
  EXPECT_THAT(err_.str(), StartsWith("baton: cannot reach the coordinator"));
}

TEST(ShortUnavailableReasonTest, TakesTheLastPart) {
  EXPECT_EQ(ShortUnavailableReason("failed to connect to all addresses; last error: UNKNOWN: "
                                   "ipv4:127.0.0.1:1: Failed to connect to remote host: "
                                   "Connection refused"),
            "Connection refused");
  EXPECT_EQ(ShortUnavailableReason(""), "unavailable");
  EXPECT_EQ(ShortUnavailableReason("Socket closed"), "Socket closed");
}

}  // namespace
}  // namespace baton::cli
