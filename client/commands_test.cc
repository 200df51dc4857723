// The CLI's commands against an in-process fake coordinator on 127.0.0.1:0.

#include "client/commands.h"

#include <arpa/inet.h>
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

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "baton/v1/job_service.grpc.pb.h"

namespace baton::cli {
namespace {

using baton::v1::Job;
using baton::v1::JobUpdate;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::MatchesRegex;
using ::testing::StartsWith;

const absl::Time kT0 = absl::FromUnixSeconds(1714564800);

// One scripted WatchJob call: these updates, then this status.
struct WatchCall {
  std::vector<JobUpdate> updates;
  grpc::Status end = grpc::Status::OK;
};

// A scripted JobService + ClusterService. Thread-safe (gRPC's sync server threads).
class FakeCoordinator final : public baton::v1::JobService::Service,
                              public baton::v1::ClusterService::Service {
 public:
  grpc::Status SubmitJob(grpc::ServerContext*, const baton::v1::SubmitJobRequest* request,
                         baton::v1::SubmitJobResponse* response) override {
    absl::MutexLock lock(&mu_);
    submitted_.push_back(request->spec());
    request_ids_.push_back(request->request_id());
    if (!submit_failures_.empty()) {
      grpc::Status failure = submit_failures_.front();
      submit_failures_.pop_front();
      return failure;
    }
    if (!submit_error_.ok()) return submit_error_;
    Job* job = response->mutable_job();
    job->set_id("j-000001");
    *job->mutable_spec() = request->spec();
    job->set_state(baton::v1::JOB_STATE_QUEUED);
    return grpc::Status::OK;
  }

  grpc::Status GetJob(grpc::ServerContext*, const baton::v1::GetJobRequest* request,
                      Job* response) override {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(request->job_id());
    if (it == jobs_.end()) {
      return grpc::Status(grpc::StatusCode::NOT_FOUND,
                          absl::StrCat("job ", request->job_id(), " not found"));
    }
    *response = it->second;
    return grpc::Status::OK;
  }

  // One job per page; the token is the index of the next one.
  grpc::Status ListJobs(grpc::ServerContext*, const baton::v1::ListJobsRequest* request,
                        baton::v1::ListJobsResponse* response) override {
    absl::MutexLock lock(&mu_);
    ++list_calls_;
    size_t index = 0;
    if (!request->page_token().empty()) index = std::stoul(request->page_token());
    auto it = jobs_.begin();
    std::advance(it, std::min(index, jobs_.size()));
    if (it == jobs_.end()) return grpc::Status::OK;
    *response->add_jobs() = it->second;
    if (index + 1 < jobs_.size()) response->set_next_page_token(std::to_string(index + 1));
    return grpc::Status::OK;
  }
  int list_calls() {
    absl::MutexLock lock(&mu_);
    return list_calls_;
  }

  grpc::Status CancelJob(grpc::ServerContext*, const baton::v1::CancelJobRequest* request,
                         Job* response) override {
    absl::MutexLock lock(&mu_);
    auto it = jobs_.find(request->job_id());
    if (it == jobs_.end()) return grpc::Status(grpc::StatusCode::NOT_FOUND, "no such job");
    if (it->second.state() == baton::v1::JOB_STATE_SUCCEEDED) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "job is already SUCCEEDED");
    }
    it->second.set_state(baton::v1::JOB_STATE_CANCELLED);
    *response = it->second;
    return grpc::Status::OK;
  }

  grpc::Status WatchJob(grpc::ServerContext*, const baton::v1::WatchJobRequest* request,
                        grpc::ServerWriter<JobUpdate>* writer) override {
    WatchCall call;
    {
      absl::MutexLock lock(&mu_);
      watch_after_seqs_.push_back(request->after_seq());
      if (watch_script_.empty()) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "script exhausted");
      }
      call = watch_script_.front();
      watch_script_.pop_front();
    }
    for (const JobUpdate& u : call.updates) writer->Write(u);
    return call.end;
  }

  grpc::Status GetLogs(grpc::ServerContext*, const baton::v1::GetLogsRequest* request,
                       grpc::ServerWriter<baton::v1::LogLine>* writer) override {
    std::vector<baton::v1::LogLine> lines;
    grpc::Status end = grpc::Status::OK;
    {
      absl::MutexLock lock(&mu_);
      logs_requests_.push_back(*request);
      for (const auto& line : logs_) {
        if (line.seq() > request->after_seq()) lines.push_back(line);
      }
      if (logs_breaks_ > 0) {
        --logs_breaks_;
        lines.resize(std::min<size_t>(lines.size(), 1));
        end = grpc::Status(grpc::StatusCode::UNAVAILABLE, "connection reset");
      }
    }
    for (const auto& line : lines) writer->Write(line);
    return end;
  }

  grpc::Status ListWorkers(grpc::ServerContext*, const baton::v1::ListWorkersRequest*,
                           baton::v1::ListWorkersResponse* response) override {
    auto* w = response->add_workers();
    w->set_id("w-a");
    w->set_host("10.0.0.5");
    w->mutable_resources()->set_slots(4);
    w->set_state(baton::v1::WORKER_STATE_READY);
    return grpc::Status::OK;
  }

  grpc::Status ProfileJob(grpc::ServerContext*, const baton::v1::ProfileJobRequest* request,
                          baton::v1::ProfileJobResponse* response) override {
    absl::MutexLock lock(&mu_);
    profile_requests_.push_back(*request);
    if (!profile_status_.ok()) return profile_status_;
    *response = profile_response_;
    return grpc::Status::OK;
  }

  void AddJob(const Job& job) {
    absl::MutexLock lock(&mu_);
    jobs_[job.id()] = job;
  }
  void ScriptProfile(baton::v1::ProfileJobResponse response, grpc::Status status) {
    absl::MutexLock lock(&mu_);
    profile_response_ = std::move(response);
    profile_status_ = std::move(status);
  }
  std::vector<baton::v1::ProfileJobRequest> profile_requests() {
    absl::MutexLock lock(&mu_);
    return profile_requests_;
  }
  void ScriptWatch(std::vector<WatchCall> calls) {
    absl::MutexLock lock(&mu_);
    watch_script_.assign(calls.begin(), calls.end());
  }
  void FailSubmit(grpc::Status status) {
    absl::MutexLock lock(&mu_);
    submit_error_ = status;
  }
  // The next SubmitJob calls fail with these, in order.
  void FailNextSubmits(std::vector<grpc::Status> failures) {
    absl::MutexLock lock(&mu_);
    submit_failures_.assign(failures.begin(), failures.end());
  }
  std::vector<std::string> request_ids() {
    absl::MutexLock lock(&mu_);
    return request_ids_;
  }
  void SetLogs(std::vector<baton::v1::LogLine> lines, int breaks) {
    absl::MutexLock lock(&mu_);
    logs_ = std::move(lines);
    logs_breaks_ = breaks;
  }
  std::vector<int64_t> watch_after_seqs() {
    absl::MutexLock lock(&mu_);
    return watch_after_seqs_;
  }
  std::vector<baton::v1::JobSpec> submitted() {
    absl::MutexLock lock(&mu_);
    return submitted_;
  }
  std::vector<baton::v1::GetLogsRequest> logs_requests() {
    absl::MutexLock lock(&mu_);
    return logs_requests_;
  }

 private:
  absl::Mutex mu_;
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
  baton::v1::ProfileJobResponse profile_response_ ABSL_GUARDED_BY(mu_);
  grpc::Status profile_status_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
  std::vector<baton::v1::ProfileJobRequest> profile_requests_ ABSL_GUARDED_BY(mu_);
  std::deque<WatchCall> watch_script_ ABSL_GUARDED_BY(mu_);
  std::vector<int64_t> watch_after_seqs_ ABSL_GUARDED_BY(mu_);
  std::vector<baton::v1::JobSpec> submitted_ ABSL_GUARDED_BY(mu_);
  grpc::Status submit_error_ ABSL_GUARDED_BY(mu_) = grpc::Status::OK;
  std::deque<grpc::Status> submit_failures_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> request_ids_ ABSL_GUARDED_BY(mu_);
  int list_calls_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<baton::v1::LogLine> logs_ ABSL_GUARDED_BY(mu_);
  int logs_breaks_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<baton::v1::GetLogsRequest> logs_requests_ ABSL_GUARDED_BY(mu_);
};

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
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    builder.RegisterService(static_cast<baton::v1::JobService::Service*>(&fake_));
    builder.RegisterService(static_cast<baton::v1::ClusterService::Service*>(&fake_));
    server_ = builder.BuildAndStart();
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

TEST_F(CommandsTest, SubmitWaitFailedExitsOneWithMessage) {
  fake_.AddJob(FinalJob(baton::v1::JOB_STATE_FAILED, "rank 1 exited with code 3"));
  fake_.ScriptWatch({{{Snapshot(baton::v1::JOB_STATE_RUNNING),
                       Event(1, baton::v1::JOB_STATE_RUNNING, baton::v1::JOB_STATE_FAILED,
                             "RankExited"),
                       Snapshot(baton::v1::JOB_STATE_FAILED)}}});
  EXPECT_EQ(Submit(ctx_, {job_file_, {}, /*wait=*/true}), kExitFailure);
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
  EXPECT_EQ(Submit(ctx_, {job_file_, {}, /*wait=*/true}), kExitFailure);
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
  EXPECT_EQ(ListJobs(ctx_), kExitFailure);
  EXPECT_THAT(err_.str(),
              MatchesRegex("baton: cannot reach the coordinator at 127\\.0\\.0\\.1:[0-9]+ "
                           "\\([^\n]+\\); is baton-coordinator running\\? Set --coordinator "
                           "or BATON_COORDINATOR \\(and for TLS --ca or --context\\)\\.\n"));
  EXPECT_THAT(err_.str(), HasSubstr(absl::StrCat("at ", address, " (")));
  EXPECT_EQ(out_.str(), "");
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
