// In-process gRPC tests of the coordinator's services: a real server on 127.0.0.1:0 with
// a real SQLite file, and a scripted worker speaking WorkerService over real gRPC.
#include "coordinator/server/server.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_split.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "baton/v1/job_service.grpc.pb.h"
#include "baton/v1/worker_service.grpc.pb.h"
#include "common/health/health_check.h"
#include "common/protocol_version.h"
#include "common/spec/message_limits.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/testing/fake_clock.h"
#include "common/version.h"
#include "coordinator/store/testing/faulty_store.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

std::chrono::system_clock::time_point Deadline(int seconds = 20) {
  return std::chrono::system_clock::now() + std::chrono::seconds(seconds);
}

// grpc.health.v1.Health/Check of `service`; the call must succeed.
ServingStatus HealthCheck(const std::shared_ptr<grpc::Channel>& channel,
                          const std::string& service) {
  const HealthAnswer answer = CheckHealth(channel, service, Deadline());
  EXPECT_TRUE(answer.status.ok()) << answer.status.error_message();
  return answer.serving;
}

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(Options()); }

  ServerOptions Options() {
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.security.insecure = true;
    options.state_dir = std::string(getenv("TEST_TMPDIR")) + "/" +
                        ::testing::UnitTest::GetInstance()->current_test_info()->name();
    options.reconcile_period = absl::Milliseconds(20);
    return options;
  }

  // (Re)starts the server with `options` (on `clock`, default real time).
  void Start(ServerOptions options, Clock* clock = RealClock::Get()) {
    server_.reset();
    server_ = std::make_unique<CoordinatorServer>(options, clock);
    ASSERT_OK(server_->Start());
    channel_ = grpc::CreateChannel("127.0.0.1:" + std::to_string(server_->port()),
                                   grpc::InsecureChannelCredentials());
    jobs_ = baton::v1::JobService::NewStub(channel_);
    cluster_ = baton::v1::ClusterService::NewStub(channel_);
    workers_ = baton::v1::WorkerService::NewStub(channel_);
  }

  baton::v1::JobSpec Spec(int min_workers) {
    baton::v1::JobSpec spec;
    spec.set_name("server-test");
    spec.mutable_command()->add_argv("/bin/true");
    spec.mutable_workers()->set_min(min_workers);
    return spec;
  }

  grpc::Status Submit(const baton::v1::JobSpec& spec, baton::v1::Job* job,
                      std::chrono::system_clock::time_point deadline = Deadline()) {
    grpc::ClientContext ctx;
    ctx.set_deadline(deadline);
    baton::v1::SubmitJobRequest req;
    *req.mutable_spec() = spec;
    baton::v1::SubmitJobResponse resp;
    grpc::Status s = jobs_->SubmitJob(&ctx, req, &resp);
    *job = resp.job();
    return s;
  }

  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<baton::v1::JobService::Stub> jobs_;
  std::unique_ptr<baton::v1::ClusterService::Stub> cluster_;
  std::unique_ptr<baton::v1::WorkerService::Stub> workers_;
};

TEST_F(ServerTest, JobServiceErrorsAreRealGrpcStatuses) {
  baton::v1::Job job;
  baton::v1::JobSpec bad = Spec(0);
  grpc::Status s = Submit(bad, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("workers.min"));

  grpc::ClientContext ctx;
  baton::v1::GetJobRequest get;
  get.set_job_id("j-404");
  baton::v1::Job out;
  s = jobs_->GetJob(&ctx, get, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);

  grpc::ClientContext wctx;
  baton::v1::WatchJobRequest watch;
  watch.set_job_id("j-404");
  auto reader = jobs_->WatchJob(&wctx, watch);
  baton::v1::JobUpdate u;
  EXPECT_FALSE(reader->Read(&u));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::NOT_FOUND);

  // ProfileJob: unknown job; a QUEUED one cannot be profiled.
  grpc::ClientContext pctx;
  baton::v1::ProfileJobRequest profile;
  profile.set_job_id("j-404");
  profile.set_steps(2);
  baton::v1::ProfileJobResponse traces;
  EXPECT_EQ(jobs_->ProfileJob(&pctx, profile, &traces).error_code(), grpc::StatusCode::NOT_FOUND);
  ASSERT_TRUE(Submit(Spec(1), &job).ok());
  grpc::ClientContext qctx;
  profile.set_job_id(job.id());
  s = jobs_->ProfileJob(&qctx, profile, &traces);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("only a RUNNING job can be profiled"));
}

// A spec over the limits reaches the coordinator (gRPC's message limit is set above them)
// and is rejected there, naming the field, rather than cut off by gRPC.
TEST_F(ServerTest, AFourMebibyteEnvValueIsInvalidArgument) {
  baton::v1::JobSpec spec = Spec(1);
  (*spec.mutable_env())["BLOB"] = std::string(4 << 20, 'x');
  baton::v1::Job job;
  grpc::Status s = Submit(spec, &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_THAT(s.error_message(), HasSubstr("env.BLOB"));
}

TEST_F(ServerTest, ListJobsPages) {
  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    baton::v1::Job job;
    ASSERT_TRUE(Submit(Spec(3), &job).ok());
    ids.insert(ids.begin(), job.id());  // newest first
  }
  auto list = [&](int page_size, int limit, const std::string& token,
                  baton::v1::ListJobsResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    baton::v1::ListJobsRequest req;
    req.set_page_size(page_size);
    req.set_limit(limit);
    req.set_page_token(token);
    return jobs_->ListJobs(&ctx, req, resp);
  };
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    baton::v1::ListJobsResponse resp;
    ASSERT_TRUE(list(2, 0, token, &resp).ok());
    for (const auto& job : resp.jobs()) seen.push_back(job.id());
    token = resp.next_page_token();
    ++pages;
  } while (!token.empty());
  EXPECT_EQ(seen, ids);
  EXPECT_EQ(pages, 3);

  // A limit spans pages: 3 jobs in pages of 2.
  baton::v1::ListJobsResponse first, second;
  ASSERT_TRUE(list(2, 3, "", &first).ok());
  ASSERT_EQ(first.jobs_size(), 2);
  ASSERT_TRUE(list(2, 0, first.next_page_token(), &second).ok());
  ASSERT_EQ(second.jobs_size(), 1);
  EXPECT_EQ(second.jobs(0).id(), ids[2]);
  EXPECT_TRUE(second.next_page_token().empty());

  baton::v1::ListJobsResponse bad;
  grpc::Status s = list(2, 0, "garbage", &bad);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("page_token"));
}

// Pages are bounded by bytes as well as count: seventeen jobs with 1 MiB of argv each (what
// one tenant may submit) used to make a page over gRPC's 16 MiB, and `baton jobs` failed
// for every user. Every job is still listed, over several pages.
TEST_F(ServerTest, ListJobsPagesStayBelowTheMessageLimitWhateverTheSpecs) {
  std::vector<std::string> ids;
  for (int i = 0; i < 17; ++i) {
    baton::v1::JobSpec spec = Spec(1);
    spec.mutable_command()->clear_argv();
    for (int a = 0; a < 32; ++a) spec.mutable_command()->add_argv(std::string(32000, 'a' + a % 26));
    baton::v1::Job job;
    const grpc::Status s = Submit(spec, &job);
    ASSERT_TRUE(s.ok()) << s.error_message();
    ids.insert(ids.begin(), job.id());
  }
  std::vector<std::string> seen;
  std::string token;
  int pages = 0;
  do {
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline());
    baton::v1::ListJobsRequest req;
    req.set_page_token(token);
    baton::v1::ListJobsResponse resp;
    const grpc::Status s = jobs_->ListJobs(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_LE(resp.ByteSizeLong(), static_cast<size_t>(kMaxListPageBytes) + 4096);
    for (const auto& job : resp.jobs()) seen.push_back(job.id());
    token = resp.next_page_token();
    ++pages;
  } while (!token.empty() && pages < 100);
  EXPECT_EQ(seen, ids);
  EXPECT_GE(pages, 5);
}

// The state directory and the database hold every job's spec and env: 0700 and 0600,
// whatever the umask.
TEST_F(ServerTest, TheStateDirectoryAndDatabaseArePrivate) {
  const ServerOptions options = Options();
  const mode_t old_umask = ::umask(0);
  Start(options);
  ::umask(old_umask);
  struct stat st;
  ASSERT_EQ(::stat(options.state_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(::stat((options.state_dir + "/coordinator.db").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
}

// A second coordinator on a port in use fails to start (gRPC would otherwise share the
// port through SO_REUSEPORT, and the kernel would split connections between the two).
TEST_F(ServerTest, APortInUseIsUnavailable) {
  ServerOptions options = Options();
  options.state_dir += "-second";
  options.listen = "127.0.0.1:" + std::to_string(server_->port());
  CoordinatorServer second(options, RealClock::Get());
  EXPECT_THAT(second.Start(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("cannot listen")));
}

// Submit does not probe the coordinator's file system for a spec's paths (it is not the
// workers'; each worker checks them against its own, and its --allowed_paths): a data_dir
// that does not exist here is accepted.
TEST_F(ServerTest, SubmitDoesNotProbeTheCoordinatorsFileSystem) {
  Start(Options());
  baton::v1::JobSpec spec;
  spec.set_name("paths");
  spec.mutable_workers()->set_min(1);
  baton::v1::TrainerSpec* t = spec.mutable_trainer();
  t->set_model("mlp");
  t->set_dataset("mnist");
  t->set_data_dir("/nonexistent/on/the/coordinator/mnist");
  spec.mutable_budget()->set_max_steps(10);
  baton::v1::Job job;
  const grpc::Status s = Submit(spec, &job);
  EXPECT_TRUE(s.ok()) << s.error_message();
  spec.mutable_trainer()->set_data_dir("relative/mnist");  // Syntax is still checked.
  EXPECT_EQ(Submit(spec, &job).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

// A worker that sends faster than the loop serves is not read ahead without bound: with
// the loop held, the stream's messages wait in the transport, not in the loop's queue.
TEST_F(ServerTest, WorkerReadsWaitForTheLoop) {
  ServerOptions options = Options();
  auto blocked = std::make_shared<absl::Notification>();
  auto release = std::make_shared<absl::Notification>();
  options.open_store = [blocked, release](const std::string& path)
      -> absl::StatusOr<std::unique_ptr<Store>> {
    absl::StatusOr<std::unique_ptr<Store>> base = Store::Open(path);
    if (!base.ok()) return base.status();
    auto store = std::make_unique<FaultyStore>(std::move(*base));
    store->SetBeforeWrite([blocked, release] {
      if (blocked->HasBeenNotified()) return;
      blocked->Notify();
      release->WaitForNotification();
    });
    return store;
  };
  Start(options);
  grpc::ClientContext wctx;
  auto stream = workers_->Connect(&wctx);
  baton::v1::WorkerMessage out;
  out.mutable_register_()->set_worker_id("w-flood");
  out.mutable_register_()->mutable_resources()->set_slots(1);
  out.mutable_register_()->set_protocol_version(kProtocolVersion);
  ASSERT_TRUE(stream->Write(out));
  baton::v1::CoordinatorMessage in;
  ASSERT_TRUE(stream->Read(&in));

  // Hold the loop in a commit, then send more heartbeats than the loop reads ahead.
  baton::v1::Job job;
  grpc::Status submitted;
  std::thread submitter([&] { submitted = Submit(Spec(2), &job); });
  blocked->WaitForNotification();
  constexpr int kHeartbeats = 3000;
  for (int i = 0; i < kHeartbeats; ++i) {
    out.Clear();
    out.mutable_heartbeat()->set_seq(i + 1);
    ASSERT_TRUE(stream->Write(out));
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(30);
  while (server_->event_loop_queued() < 1024 && absl::Now() < deadline) {
    absl::SleepFor(absl::Milliseconds(1));  // polling a real server's state, bounded
  }
  EXPECT_GE(server_->event_loop_queued(), 1024u) << "the stream was not read at all";
  EXPECT_LE(server_->event_loop_queued(), 1026u) << "read ahead without bound";
  release->Notify();
  submitter.join();
  ASSERT_TRUE(submitted.ok()) << submitted.error_message();
  // Every heartbeat is still served, in order: the acks come back, the last one last.
  uint64_t last_ack = 0;
  while (last_ack < kHeartbeats && stream->Read(&in)) {
    if (in.has_heartbeat_ack()) {
      EXPECT_EQ(in.heartbeat_ack().seq(), last_ack + 1);
      last_ack = in.heartbeat_ack().seq();
    }
  }
  EXPECT_EQ(last_ack, static_cast<uint64_t>(kHeartbeats));
  wctx.TryCancel();
}

// A store call stuck in the kernel (a hung mount under the state directory) holds the
// event loop; past the limit the coordinator stops serving and its stuck handler runs (the
// daemon exits there), instead of answering health checks with a dead loop.
TEST_F(ServerTest, AStuckStoreStopsServing) {
  FakeClock clock;
  ServerOptions options = Options();
  options.store_stall_limit = absl::Seconds(60);
  options.health_listen = "127.0.0.1:0";  // probes' plaintext port follows the same status
  auto in_write = std::make_shared<absl::Notification>();
  auto release = std::make_shared<absl::Notification>();
  options.open_store = [in_write, release](const std::string& path)
      -> absl::StatusOr<std::unique_ptr<Store>> {
    absl::StatusOr<std::unique_ptr<Store>> base = Store::Open(path);
    if (!base.ok()) return base.status();
    auto store = std::make_unique<FaultyStore>(std::move(*base));
    store->SetBeforeWrite([in_write, release] {
      in_write->Notify();
      release->WaitForNotification();
    });
    return store;
  };
  absl::Notification stuck;
  absl::Status why;
  options.on_store_stuck = [&](const absl::Status& s) {
    why = s;
    stuck.Notify();
  };
  Start(options, &clock);
  baton::v1::Job job;
  grpc::Status submitted;
  std::thread submitter([&] { submitted = Submit(Spec(1), &job); });
  in_write->WaitForNotification();
  std::shared_ptr<grpc::Channel> probe = grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", server_->health_port()), grpc::InsecureChannelCredentials());
  EXPECT_EQ(HealthCheck(channel_, "baton.v1.JobService"), ServingStatus::kServing);
  EXPECT_EQ(HealthCheck(probe, "baton.v1.JobService"), ServingStatus::kServing);
  clock.Advance(absl::Seconds(90));
  ASSERT_TRUE(stuck.HasBeenNotified());
  EXPECT_THAT(why.message(), HasSubstr("has not returned"));
  EXPECT_EQ(HealthCheck(channel_, "baton.v1.JobService"), ServingStatus::kNotServing);
  EXPECT_EQ(HealthCheck(probe, "baton.v1.JobService"), ServingStatus::kNotServing);
  release->Notify();
  submitter.join();
  server_.reset();  // before `clock`, which it uses
}

TEST_F(ServerTest, HealthServiceReportsServing) {
  EXPECT_EQ(HealthCheck(channel_, "baton.v1.JobService"), ServingStatus::kServing);
}

// Fail-stop: a store that cannot commit takes the coordinator out of service (health
// NOT_SERVING, every call UNAVAILABLE, the halt handler called once, as the daemon exits
// there), and a restart over the same directory recovers what was committed.
TEST_F(ServerTest, AStoreFailureStopsServing) {
  ServerOptions options = Options();
  FaultyStore* faulty = nullptr;
  options.open_store = [&faulty](const std::string& path)
      -> absl::StatusOr<std::unique_ptr<Store>> {
    absl::StatusOr<std::unique_ptr<Store>> base = Store::Open(path);
    if (!base.ok()) return base.status();
    auto store = std::make_unique<FaultyStore>(std::move(*base));
    faulty = store.get();
    return store;
  };
  std::atomic<int> halts{0};
  absl::Notification halted;
  options.on_halt = [&](const absl::Status&) {
    if (++halts == 1) halted.Notify();
  };
  Start(options);
  baton::v1::Job kept;
  ASSERT_TRUE(Submit(Spec(1), &kept).ok());

  faulty->FailWrite(1, /*sticky=*/true);
  baton::v1::Job job;
  grpc::Status s = Submit(Spec(1), &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("injected"));
  ASSERT_TRUE(halted.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_TRUE(server_->halted());
  EXPECT_EQ(HealthCheck(channel_, "baton.v1.JobService"), ServingStatus::kNotServing);
  EXPECT_EQ(HealthCheck(channel_, ""), ServingStatus::kNotServing);
  s = Submit(Spec(1), &job);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_THAT(s.error_message(), HasSubstr("store failed"));
  EXPECT_EQ(halts.load(), 1);

  Start(Options());  // what a restart finds: the committed job only
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  baton::v1::ListJobsResponse list;
  ASSERT_TRUE(jobs_->ListJobs(&ctx, baton::v1::ListJobsRequest(), &list).ok());
  ASSERT_EQ(list.jobs_size(), 1);
  EXPECT_EQ(list.jobs(0).id(), kept.id());
}

// A SubmitJob whose client gave up while it waited for the event loop creates nothing.
TEST_F(ServerTest, ASubmitWhoseClientHasGoneCreatesNothing) {
  ServerOptions options = Options();
  absl::Notification blocked, release;
  options.open_store = [&](const std::string& path) -> absl::StatusOr<std::unique_ptr<Store>> {
    absl::StatusOr<std::unique_ptr<Store>> base = Store::Open(path);
    if (!base.ok()) return base.status();
    auto store = std::make_unique<FaultyStore>(std::move(*base));
    // The first commit (the first submit's) holds the event loop until released.
    store->SetBeforeWrite([&, first = true]() mutable {
      if (!std::exchange(first, false)) return;
      blocked.Notify();
      release.WaitForNotification();
    });
    return store;
  };
  Start(options);
  baton::v1::Job first;
  grpc::Status first_status;
  std::thread submitter([&] { first_status = Submit(Spec(1), &first); });
  blocked.WaitForNotification();
  // Queued behind the blocked loop until its deadline passes (seen by the client).
  baton::v1::Job late;
  grpc::Status s = Submit(Spec(1), &late, std::chrono::system_clock::now() +
                                              std::chrono::milliseconds(200));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  release.Notify();
  submitter.join();
  ASSERT_TRUE(first_status.ok()) << first_status.error_message();

  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  baton::v1::ListJobsResponse list;
  ASSERT_TRUE(jobs_->ListJobs(&ctx, baton::v1::ListJobsRequest(), &list).ok());
  ASSERT_EQ(list.jobs_size(), 1) << "the late submit created a job its client never saw";
  EXPECT_EQ(list.jobs(0).id(), first.id());
}

TEST_F(ServerTest, WorkerMustRegisterFirst) {
  grpc::ClientContext ctx;
  auto stream = workers_->Connect(&ctx);
  baton::v1::WorkerMessage hb;
  hb.mutable_heartbeat();
  ASSERT_TRUE(stream->Write(hb));
  baton::v1::CoordinatorMessage msg;
  EXPECT_FALSE(stream->Read(&msg));
  grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("Register"));
}

// A peer sending more than any worker does (here 1001 metric points in one report) is cut
// off with INVALID_ARGUMENT naming the limit, and its session ends with the stream.
TEST_F(ServerTest, AnOversizedReportEndsTheWorkersSession) {
  grpc::ClientContext wctx;
  auto stream = workers_->Connect(&wctx);
  baton::v1::WorkerMessage reg;
  reg.mutable_register_()->set_worker_id("w-big");
  reg.mutable_register_()->mutable_resources()->set_slots(1);
  reg.mutable_register_()->set_protocol_version(kProtocolVersion);
  ASSERT_TRUE(stream->Write(reg));
  baton::v1::CoordinatorMessage in;
  ASSERT_TRUE(stream->Read(&in));
  baton::v1::WorkerMessage big;
  for (int i = 0; i <= kMaxReportEntries; ++i) big.mutable_metrics()->add_points();
  ASSERT_TRUE(stream->Write(big));
  while (stream->Read(&in)) {
  }
  grpc::Status s = stream->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("metrics.points: 1001 points is too large"));
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  baton::v1::ListWorkersResponse workers;
  ASSERT_TRUE(cluster_->ListWorkers(&ctx, {}, &workers).ok());
  ASSERT_EQ(workers.workers_size(), 1);
  EXPECT_NE(workers.workers(0).state(), baton::v1::WORKER_STATE_READY);
}

// A scripted worker runs a job end to end over the real WorkerService stream while a
// client watches it over JobService.
TEST_F(ServerTest, ScriptedWorkerRunsJobWhileClientWatches) {
  grpc::ClientContext wctx;
  auto stream = workers_->Connect(&wctx);
  baton::v1::WorkerMessage out;
  baton::v1::Register* reg = out.mutable_register_();
  reg->set_worker_id("w-test");
  reg->mutable_resources()->set_slots(1);
  reg->set_protocol_version(kProtocolVersion);
  ASSERT_TRUE(stream->Write(out));
  baton::v1::CoordinatorMessage in;
  ASSERT_TRUE(stream->Read(&in));
  ASSERT_TRUE(in.has_registered());
  EXPECT_EQ(in.registered().protocol_version(), kProtocolVersion);

  baton::v1::Job job;
  ASSERT_TRUE(Submit(Spec(1), &job).ok());

  grpc::ClientContext watch_ctx;
  baton::v1::WatchJobRequest watch;
  watch.set_job_id(job.id());
  auto watcher = jobs_->WatchJob(&watch_ctx, watch);

  ASSERT_TRUE(stream->Read(&in));
  ASSERT_TRUE(in.has_reserve_port()) << in.DebugString();
  out.Clear();
  out.mutable_port_reserved()->set_job_id(job.id());
  out.mutable_port_reserved()->set_generation(in.reserve_port().generation());
  out.mutable_port_reserved()->set_port(23456);
  ASSERT_TRUE(stream->Write(out));

  ASSERT_TRUE(stream->Read(&in));
  ASSERT_TRUE(in.has_start_assignment()) << in.DebugString();
  const baton::v1::StartAssignment start = in.start_assignment();
  EXPECT_EQ(start.master_addr(), "127.0.0.1");  // from the stream's peer address
  EXPECT_EQ(start.master_port(), 23456);
  ASSERT_EQ(start.ranks_size(), 1);

  out.Clear();
  auto* started = out.mutable_assignment_started();
  started->set_job_id(job.id());
  started->set_generation(start.generation());
  *started->add_ranks() = start.ranks(0);
  started->mutable_ranks(0)->set_pid(777);
  ASSERT_TRUE(stream->Write(out));

  out.Clear();
  out.mutable_metrics()->set_job_id(job.id());
  auto* p = out.mutable_metrics()->add_points();
  p->set_generation(start.generation());
  p->set_step(5);
  (*p->mutable_values())["loss"] = 0.25;
  ASSERT_TRUE(stream->Write(out));

  out.Clear();
  out.mutable_logs()->set_job_id(job.id());
  auto* line = out.mutable_logs()->add_lines();
  line->set_generation(start.generation());
  line->set_rank(0);
  line->set_text("hello from rank 0");
  ASSERT_TRUE(stream->Write(out));

  out.Clear();
  out.mutable_process_exited()->set_job_id(job.id());
  out.mutable_process_exited()->set_generation(start.generation());
  out.mutable_process_exited()->set_rank(0);
  out.mutable_process_exited()->mutable_exit()->set_exit_code(0);
  ASSERT_TRUE(stream->Write(out));

  // The watch sees the whole story in order and ends when the job is terminal.
  std::vector<std::string> reasons;
  int64_t last_seq = 0;
  bool saw_metric = false;
  baton::v1::JobState final_state = baton::v1::JOB_STATE_UNSPECIFIED;
  baton::v1::JobUpdate u;
  while (watcher->Read(&u)) {
    if (u.has_event()) reasons.push_back(u.event().reason());
    if (u.has_metric()) saw_metric = u.metric().step() == 5;
    if (u.has_snapshot()) final_state = u.snapshot().state();
    if (u.seq() != 0) {
      EXPECT_GT(u.seq(), last_seq);
      last_seq = u.seq();
    }
  }
  ASSERT_TRUE(watcher->Finish().ok());
  EXPECT_EQ(final_state, baton::v1::JOB_STATE_SUCCEEDED);
  EXPECT_TRUE(saw_metric);
  EXPECT_EQ(reasons, (std::vector<std::string>{"Submitted", "Scheduled", "Started",
                                               "RankExited", "Completed"}));

  // Resuming from a sequence number replays only what came after it.
  grpc::ClientContext resume_ctx;
  watch.set_after_seq(last_seq - 1);
  auto resumed = jobs_->WatchJob(&resume_ctx, watch);
  std::vector<int64_t> seqs;
  while (resumed->Read(&u)) seqs.push_back(u.seq());
  ASSERT_TRUE(resumed->Finish().ok());
  EXPECT_EQ(seqs, (std::vector<int64_t>{0, last_seq}));

  grpc::ClientContext logs_ctx;
  baton::v1::GetLogsRequest logs;
  logs.set_job_id(job.id());
  logs.set_rank(-1);
  auto log_reader = jobs_->GetLogs(&logs_ctx, logs);
  baton::v1::LogLine l;
  ASSERT_TRUE(log_reader->Read(&l));
  EXPECT_EQ(l.text(), "hello from rank 0");
  EXPECT_EQ(l.seq(), 1);
  EXPECT_FALSE(log_reader->Read(&l));
  EXPECT_TRUE(log_reader->Finish().ok());

  // A tail out of range is refused naming the field and the allowed range.
  grpc::ClientContext bad_tail_ctx;
  logs.set_tail(-1);
  auto bad_tail = jobs_->GetLogs(&bad_tail_ctx, logs);
  EXPECT_FALSE(bad_tail->Read(&l));
  const grpc::Status bad_tail_status = bad_tail->Finish();
  EXPECT_EQ(bad_tail_status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(bad_tail_status.error_message(), HasSubstr("tail: -1 is out of range"));

  grpc::ClientContext version_ctx;
  baton::v1::GetVersionResponse version;
  ASSERT_TRUE(cluster_->GetVersion(&version_ctx, {}, &version).ok());
  EXPECT_EQ(version.version(), kVersion);
  EXPECT_EQ(version.protocol_version(), kProtocolVersion);
  EXPECT_EQ(version.min_worker_protocol_version(), kMinWorkerProtocolVersion);

  grpc::ClientContext list_ctx;
  baton::v1::ListWorkersResponse workers;
  ASSERT_TRUE(cluster_->ListWorkers(&list_ctx, {}, &workers).ok());
  ASSERT_EQ(workers.workers_size(), 1);
  EXPECT_EQ(workers.workers(0).id(), "w-test");
  EXPECT_EQ(workers.workers(0).state(), baton::v1::WORKER_STATE_READY);

  grpc::ClientContext get_ctx;
  baton::v1::GetJobRequest get;
  get.set_job_id(job.id());
  baton::v1::Job done;
  ASSERT_TRUE(jobs_->GetJob(&get_ctx, get, &done).ok());
  EXPECT_EQ(done.ranks(0).pid(), 777);
  EXPECT_EQ(done.result().final_metrics().at("loss"), 0.25);

  stream->WritesDone();
  wctx.TryCancel();
}

// The status of a unary call of `method` (generic: empty request bytes), with `token` as
// bearer token unless empty.
grpc::Status CallStatus(const std::shared_ptr<grpc::Channel>& channel, const std::string& method,
                        const std::string& token) {
  grpc::GenericStub generic(channel);
  grpc::Slice empty("");
  grpc::ByteBuffer req(&empty, 1), resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(Deadline());
  if (!token.empty()) ctx.AddMetadata("authorization", "Bearer " + token);
  grpc::Status status;
  absl::Notification done;
  generic.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
    status = s;
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return std::string(absl::StripAsciiWhitespace(ss.str()));
}

// The coordinator as deployed: TLS from a CA made by tools/certs.sh, users' tokens.
class TlsServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    pki_ = std::string(getenv("TEST_TMPDIR")) + "/pki";
    const std::string certs = std::string(getenv("TEST_SRCDIR")) + "/baton/tools/certs.sh";
    ASSERT_EQ(std::system((certs + " " + pki_ + " --user root:admin --user vic:viewer "
                           ">/dev/null").c_str()),
              0);
    ServerOptions options;
    options.listen = "127.0.0.1:0";
    options.health_listen = "127.0.0.1:0";
    options.state_dir = std::string(getenv("TEST_TMPDIR")) + "/state";
    options.security.tls = {pki_ + "/ca.crt", pki_ + "/coordinator.crt", pki_ + "/coordinator.key"};
    options.token_file = pki_ + "/tokens";
    server_ = std::make_unique<CoordinatorServer>(options, RealClock::Get());
    ASSERT_OK(server_->Start());
    grpc::SslCredentialsOptions tls;
    tls.pem_root_certs = ReadText(pki_ + "/ca.crt") + "\n";
    // 127.0.0.1, checked against the certificate's DNS:localhost (no resolver involved).
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    channel_ = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", server_->port()),
                                         grpc::SslCredentials(tls), args);
  }

  std::string pki_;
  std::unique_ptr<CoordinatorServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
};

TEST_F(TlsServerTest, EveryUserCallNeedsAToken) {
  const std::string root = ReadText(pki_ + "/users/root.token");
  for (const char* method :
       {"/baton.v1.JobService/ListJobs", "/baton.v1.JobService/GetJob",
        "/baton.v1.JobService/SubmitJob", "/baton.v1.JobService/CancelJob",
        "/baton.v1.JobService/ProfileJob", "/baton.v1.ClusterService/ListWorkers",
        "/baton.v1.ClusterService/GetVersion"}) {
    EXPECT_EQ(CallStatus(channel_, method, "").error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << method;
    EXPECT_EQ(CallStatus(channel_, method, "forged").error_code(),
              grpc::StatusCode::UNAUTHENTICATED)
        << method;
  }
  EXPECT_TRUE(CallStatus(channel_, "/baton.v1.JobService/ListJobs", root).ok());
  // Health stays open, on the TLS port and on the probes' plaintext port.
  EXPECT_EQ(HealthCheck(channel_, "baton.v1.JobService"), ServingStatus::kServing);
  EXPECT_EQ(HealthCheck(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->health_port()),
                                            grpc::InsecureChannelCredentials()),
                        "baton.v1.JobService"),
            ServingStatus::kServing);
}

// Revocation is immediate: removing a token from the file and reloading it (SIGHUP) ends
// that token's open watch and log streams, not only its next calls; others go on.
TEST_F(TlsServerTest, RevokingATokenEndsItsOpenStreams) {
  const std::string root = ReadText(pki_ + "/users/root.token");
  const std::string vic = ReadText(pki_ + "/users/vic.token");
  auto stub = baton::v1::JobService::NewStub(channel_);
  baton::v1::SubmitJobRequest submit;
  submit.mutable_spec()->set_name("queued");
  submit.mutable_spec()->mutable_command()->add_argv("/bin/true");
  submit.mutable_spec()->mutable_workers()->set_min(1);
  baton::v1::SubmitJobResponse submitted;
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer " + root);
    const grpc::Status s = stub->SubmitJob(&ctx, submit, &submitted);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  const std::string id = submitted.job().id();
  // vic watches and follows the logs of the job (queued: it never ends by itself).
  grpc::ClientContext watch_ctx, logs_ctx, kept_ctx;
  watch_ctx.AddMetadata("authorization", "Bearer " + vic);
  logs_ctx.AddMetadata("authorization", "Bearer " + vic);
  kept_ctx.AddMetadata("authorization", "Bearer " + root);
  // Without the revocation the streams would run until these deadlines (DEADLINE_EXCEEDED).
  const auto deadline = std::chrono::system_clock::now() + std::chrono::seconds(30);
  watch_ctx.set_deadline(deadline);
  logs_ctx.set_deadline(deadline);
  baton::v1::WatchJobRequest watch;
  watch.set_job_id(id);
  auto watcher = stub->WatchJob(&watch_ctx, watch);
  auto kept = stub->WatchJob(&kept_ctx, watch);
  baton::v1::GetLogsRequest logs;
  logs.set_job_id(id);
  logs.set_rank(-1);
  logs.set_follow(true);
  auto follower = stub->GetLogs(&logs_ctx, logs);
  baton::v1::JobUpdate u;
  ASSERT_TRUE(watcher->Read(&u));  // The snapshot: the stream is open.
  ASSERT_TRUE(kept->Read(&u));

  // Drop vic's line from the token file, then reload.
  std::string tokens = ReadText(pki_ + "/tokens");
  std::string without_vic;
  for (absl::string_view line : absl::StrSplit(tokens, '\n')) {
    if (!absl::StrContains(line, " vic ")) absl::StrAppend(&without_vic, line, "\n");
  }
  ASSERT_NE(without_vic.size(), tokens.size() + 1) << "vic's line not found";
  { std::ofstream(pki_ + "/tokens", std::ios::trunc) << without_vic; }
  ASSERT_OK(server_->ReloadTokens());

  while (watcher->Read(&u)) {
  }
  grpc::Status ended = watcher->Finish();
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::UNAUTHENTICATED) << ended.error_message();
  EXPECT_THAT(ended.error_message(), HasSubstr("revoked"));
  baton::v1::LogLine line;
  while (follower->Read(&line)) {
  }
  EXPECT_EQ(follower->Finish().error_code(), grpc::StatusCode::UNAUTHENTICATED);
  // root's watch is still open: cancel it ourselves.
  kept_ctx.TryCancel();
  while (kept->Read(&u)) {
  }
  EXPECT_EQ(kept->Finish().error_code(), grpc::StatusCode::CANCELLED);
  // The fixture's files are shared by the tests: put vic back.
  { std::ofstream(pki_ + "/tokens", std::ios::trunc) << tokens << "\n"; }
}

TEST_F(TlsServerTest, ReflectionOnlyForAuthenticatedCallers) {
  const std::string method = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  grpc::Status anonymous = CallStatus(channel_, method, "");
  EXPECT_EQ(anonymous.error_code(), grpc::StatusCode::UNAUTHENTICATED)
      << anonymous.error_message();
  EXPECT_THAT(anonymous.error_message(), HasSubstr("server reflection needs a valid bearer"));
  EXPECT_EQ(CallStatus(channel_, method, "forged").error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  grpc::Status viewer = CallStatus(channel_, method, ReadText(pki_ + "/users/vic.token"));
  EXPECT_TRUE(viewer.ok()) << viewer.error_code() << " " << viewer.error_message();
  // The probes' plaintext port serves health only.
  EXPECT_EQ(CallStatus(grpc::CreateChannel(absl::StrCat("127.0.0.1:", server_->health_port()),
                                           grpc::InsecureChannelCredentials()),
                       method, "")
                .error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
}

TEST(HostFromPeerTest, DropsTheSchemeAndThePort) {
  EXPECT_EQ(HostFromPeer("ipv4:127.0.0.1:5000"), "127.0.0.1");
  EXPECT_EQ(HostFromPeer("ipv6:[::1]:5000"), "::1");
  EXPECT_EQ(HostFromPeer("10.0.0.2:80"), "10.0.0.2");
}

}  // namespace
}  // namespace baton::coordinator
