#include "coordinator/server/metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>

#include "common/protocol_version.h"
#include "common/testing/metrics_testing.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "coordinator/control/worker_registry.h"
#include "coordinator/queues/queue_file.h"
#include "coordinator/store/store.h"
#include "coordinator/testing/fake_channel.h"

namespace baton::coordinator {
namespace {

using ::testing::DoubleNear;
using ::testing::Optional;

using ::baton::metrics_testing::Point;
using ::baton::metrics_testing::Value;

class CoordinatorMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
    ASSERT_OK(store);
    store_ = std::move(*store);
    jobs_ = std::make_unique<JobManager>(store_.get(), &clock_);
    ASSERT_OK(jobs_->Load());
    workers_ = std::make_unique<WorkerRegistry>(&clock_);
    coordinator_ =
        std::make_unique<Coordinator>(jobs_.get(), workers_.get(), &clock_, CoordinatorOptions());
    CoordinatorMetricsOptions options;
    options.terminal_retention = absl::Minutes(10);
    metrics_ = std::make_unique<CoordinatorMetrics>(options, &loop_, jobs_.get(),
                                                    coordinator_.get(), &clock_);
  }
  void TearDown() override { loop_.Stop(); }

  std::string Submit() {
    baton::v1::JobSpec spec;
    spec.set_name("m");
    spec.mutable_command()->add_argv("/bin/true");
    spec.mutable_workers()->set_min(1);
    absl::StatusOr<baton::v1::Job> job = jobs_->Submit(spec);
    EXPECT_OK(job);
    return job.ok() ? job->id() : "";
  }
  void Move(const std::string& id, JobState to, const std::string& reason) {
    ASSERT_OK(jobs_->Transition(id, to, reason, reason));
  }
  // What the Coordinator does when a generation fails with restarts left: counts the
  // restart, records the failure (now) and moves the job to RESTARTING.
  void FailAndRestart(const std::string& id, const std::string& reason) {
    baton::v1::Job job = *jobs_->Peek(id);
    job.mutable_restarts()->set_infra(job.restarts().infra() + 1);
    baton::v1::Failure* f = job.mutable_restarts()->add_failures();
    f->set_generation(job.generation());
    f->set_next_generation(job.generation() + 1);
    f->set_failure_class(baton::v1::FAILURE_CLASS_INFRA);
    // The worker's last heartbeat was 1.5 s before the coordinator noticed.
    *f->mutable_occurred_time() = ToProto(clock_.Now() - absl::Milliseconds(1500));
    *f->mutable_fail_time() = ToProto(clock_.Now());
    ASSERT_OK(jobs_->Transition(id, JobState::kRestarting, reason, reason, &job));
  }
  // Stamps a recovery time of the job's last failure (`field` is e.g. mutable_stopped_time).
  void Stamp(const std::string& id, google::protobuf::Timestamp* (baton::v1::Failure::*field)()) {
    baton::v1::Job job = *jobs_->Peek(id);
    auto* failures = job.mutable_restarts()->mutable_failures();
    *((*failures)[failures->size() - 1].*field)() = ToProto(clock_.Now());
    ASSERT_OK(jobs_->Update(job));
  }
  double ResultGoodput(const std::string& id) {
    absl::StatusOr<baton::v1::Job> job = jobs_->Get(id);
    EXPECT_OK(job);
    return job.ok() ? job->result().goodput() : -1;
  }

  // The domain objects are only touched by this thread while no Collect() runs; Collect()
  // hands the loop its work and waits, so the two never overlap.
  FakeClock clock_;
  EventLoop loop_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<JobManager> jobs_;
  std::unique_ptr<WorkerRegistry> workers_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<CoordinatorMetrics> metrics_;
};

// The state directory's size on disk, for an alert before the disk fills, and the store's
// transactions (fsyncs) and the time they take.
TEST(CoordinatorMetricsStateTest, ExportsTheStateSizeAndCommits) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/state.db";
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(path);
  ASSERT_OK(store);
  FakeClock clock;
  JobManager jobs(store->get(), &clock);
  ASSERT_OK(jobs.Load());
  WorkerRegistry workers(&clock);
  Coordinator coordinator(&jobs, &workers, &clock, CoordinatorOptions());
  EventLoop loop;
  CoordinatorMetrics metrics(CoordinatorMetricsOptions(), &loop, &jobs, &coordinator, &clock);
  const std::optional<double> before =
      Value(metrics.Collect(), "baton_coordinator_state_bytes", {});
  ASSERT_TRUE(before.has_value());
  EXPECT_GT(*before, 0);
  baton::v1::JobSpec spec;
  spec.set_name("big");
  spec.mutable_command()->add_argv("/bin/true");
  spec.mutable_workers()->set_min(1);
  (*spec.mutable_env())["PAD"] = std::string(30000, 'p');
  for (int i = 0; i < 20; ++i) ASSERT_OK(jobs.Submit(spec));
  const std::vector<prometheus::MetricFamily> scrape = metrics.Collect();
  const std::optional<double> after = Value(scrape, "baton_coordinator_state_bytes", {});
  ASSERT_TRUE(after.has_value());
  EXPECT_GT(*after, *before + 20 * 30000);
  // A submit is one transaction.
  EXPECT_THAT(Value(scrape, "baton_coordinator_store_commits_total", {{"result", "ok"}}),
              Optional(20.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_store_commits_total", {{"result", "failed"}}),
              Optional(0.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_store_commit_seconds_total", {}), Optional(0.0));
  loop.Stop();
}

TEST_F(CoordinatorMetricsTest, FollowsAJobThroughItsStatesRestartsAndGoodput) {
  const std::string id = Submit();
  auto scrape = metrics_->Collect();
  EXPECT_THAT(Value(scrape, "baton_coordinator_jobs", {{"state", "queued"}}), Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_queue_length", {}), Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_state", {{"job_id", id}, {"state", "queued"}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_workers", {{"state", "ready"}}), Optional(0.0));
  // The planned resizes' causes exist before any resize, so their first one is an increase.
  EXPECT_THAT(Value(scrape, "baton_coordinator_restarts_total", {{"cause", "Draining"}}),
              Optional(0.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_restarts_total", {{"cause", "ScalingUp"}}),
              Optional(0.0));

  clock_.Advance(absl::Seconds(3));
  Move(id, JobState::kRendezvous, "Scheduled");
  clock_.Advance(absl::Seconds(2));
  Move(id, JobState::kRunning, "Started");
  // Rank 0 at 0.5 s/step, rank 1 at 1.0 s/step; 10 steps each.
  ASSERT_OK(jobs_->AddMetrics(id, {Point(1, 0, 10, 0.5), Point(1, 1, 10, 1.0)}));
  ASSERT_OK(jobs_->Flush());  // the event loop's group commit
  clock_.Advance(absl::Seconds(10));
  scrape = metrics_->Collect();
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_state", {{"job_id", id}, {"state", "queued"}}),
              Optional(0.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_state", {{"job_id", id}, {"state", "running"}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_queue_wait_seconds", {}, "sum"), Optional(3.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_rendezvous_duration_seconds", {}, "sum"),
              Optional(2.0));
  // 10 steps x 0.5 s productive over 12 s since the first RENDEZVOUS.
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_goodput_ratio", {{"job_id", id}}),
              Optional(DoubleNear(5.0 / 12, 1e-9)));
  // Median of 0.5 and 1.0 is 0.75.
  EXPECT_THAT(Value(scrape, "baton_rank_slowdown_ratio", {{"job_id", id}, {"rank", "1"}}),
              Optional(DoubleNear(1.0 / 0.75, 1e-9)));
  EXPECT_THAT(Value(scrape, "baton_rank_slowdown_ratio", {{"job_id", id}, {"rank", "0"}}),
              Optional(DoubleNear(0.5 / 0.75, 1e-9)));
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_restarts_total", {{"job_id", id}}),
              Optional(0.0));

  // The recovery phases of the failure, as the coordinator stamps them.
  FailAndRestart(id, "WorkerLost");
  clock_.Advance(absl::Milliseconds(250));
  Stamp(id, &baton::v1::Failure::mutable_stopped_time);
  clock_.Advance(absl::Milliseconds(750));
  Stamp(id, &baton::v1::Failure::mutable_rendezvous_time);
  Move(id, JobState::kRendezvous, "Restarted");
  clock_.Advance(absl::Seconds(1));
  Stamp(id, &baton::v1::Failure::mutable_running_time);
  Move(id, JobState::kRunning, "Started");
  scrape = metrics_->Collect();
  const auto recovery = [&](const char* phase, const char* what) {
    return Value(scrape, "baton_coordinator_recovery_duration_seconds", {{"phase", phase}}, what);
  };
  EXPECT_THAT(recovery("detect", "sum"), Optional(DoubleNear(1.5, 1e-9)));
  EXPECT_THAT(recovery("stop", "sum"), Optional(DoubleNear(0.25, 1e-9)));
  EXPECT_THAT(recovery("backoff", "sum"), Optional(DoubleNear(0.75, 1e-9)));
  EXPECT_THAT(recovery("rendezvous", "sum"), Optional(DoubleNear(1.0, 1e-9)));
  EXPECT_THAT(recovery("restore", "count"), Optional(0.0));  // no step yet
  clock_.Advance(absl::Milliseconds(500));
  Stamp(id, &baton::v1::Failure::mutable_first_step_time);
  // Generation 2 restored step 8: steps 9..10 are recomputed (not productive), 11..14 are.
  ASSERT_OK(jobs_->AddMetrics(id, {Point(2, 0, 8, 0.5), Point(2, 0, 14, 0.5)}));
  ASSERT_OK(jobs_->Flush());  // the event loop's group commit
  scrape = metrics_->Collect();
  // Each phase observed once for the failure, however often it is scraped.
  for (const char* phase : {"detect", "stop", "backoff", "rendezvous", "restore"}) {
    EXPECT_THAT(recovery(phase, "count"), Optional(1.0)) << phase;
  }
  EXPECT_THAT(recovery("restore", "sum"), Optional(DoubleNear(0.5, 1e-9)));
  EXPECT_THAT(Value(scrape, "baton_coordinator_restarts_total", {{"cause", "WorkerLost"}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_restarts_total", {{"job_id", id}}),
              Optional(1.0));
  // 7 s productive over the 14.5 s since the first RENDEZVOUS; the job record agrees.
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_goodput_ratio", {{"job_id", id}}),
              Optional(DoubleNear((5.0 + 2.0) / 14.5, 1e-9)));
  EXPECT_DOUBLE_EQ(ResultGoodput(id), (5.0 + 2.0) / 14.5);
  // Only rank 0 reported in generation 2: no slowdown ratio.
  EXPECT_EQ(Value(scrape, "baton_rank_slowdown_ratio", {{"job_id", id}, {"rank", "0"}}),
            std::nullopt);

  // A hang names its culprit: rank, worker, phase and evidence.
  {
    baton::v1::Job job = *jobs_->Peek(id);
    baton::v1::Failure* f = job.mutable_restarts()->add_failures();
    f->set_generation(job.generation());
    f->set_failure_class(baton::v1::FAILURE_CLASS_STALL);
    f->set_rank(1);
    f->set_worker_id("w2");
    f->set_hang_phase("step");
    f->set_hang_evidence("silent");
    ASSERT_OK(jobs_->Update(job));
  }
  scrape = metrics_->Collect();
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_hangs_total",
                    {{"job_id", id},
                     {"rank", "1"},
                     {"worker", "w2"},
                     {"phase", "step"},
                     {"evidence", "silent"}}),
              Optional(1.0));

  Move(id, JobState::kSucceeded, "Completed");
  clock_.Advance(absl::Minutes(9));
  scrape = metrics_->Collect();
  // Ended: goodput frozen at the end time, in the metric and in the record alike.
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_goodput_ratio", {{"job_id", id}}),
              Optional(ResultGoodput(id)));
  EXPECT_DOUBLE_EQ(ResultGoodput(id), (5.0 + 2.0) / 14.5);
  EXPECT_THAT(
      Value(scrape, "baton_coordinator_job_state", {{"job_id", id}, {"state", "succeeded"}}),
      Optional(1.0));
  clock_.Advance(absl::Minutes(1));
  scrape = metrics_->Collect();
  EXPECT_EQ(Value(scrape, "baton_coordinator_job_state", {{"job_id", id}, {"state", "succeeded"}}),
            std::nullopt);
  EXPECT_THAT(Value(scrape, "baton_coordinator_jobs", {{"state", "succeeded"}}), Optional(1.0));
  for (const prometheus::MetricFamily& f : scrape) {
    EXPECT_FALSE(f.help.empty()) << f.name;
    EXPECT_EQ(f.name.rfind("baton_", 0), 0u) << f.name;
  }
}

TEST_F(CoordinatorMetricsTest, JobsThatEndedBeforeTheProcessStartedAreNotFollowed) {
  const std::string id = Submit();
  Move(id, JobState::kCancelled, "Cancelled");
  // A new metrics object (a restarted coordinator) started after the job ended.
  clock_.Advance(absl::Seconds(1));
  CoordinatorMetrics fresh(CoordinatorMetricsOptions(), &loop_, jobs_.get(), coordinator_.get(),
                           &clock_);
  const auto scrape = fresh.Collect();
  EXPECT_EQ(Value(scrape, "baton_coordinator_job_state", {{"job_id", id}, {"state", "cancelled"}}),
            std::nullopt);
  EXPECT_THAT(Value(scrape, "baton_coordinator_jobs", {{"state", "cancelled"}}), Optional(1.0));
}

TEST_F(CoordinatorMetricsTest, TimesRpcsByMethodAndCode) {
  metrics_->ObserveRpc("baton.v1.JobService/GetJob", grpc::StatusCode::NOT_FOUND,
                       absl::Milliseconds(3));
  EXPECT_THAT(Value(metrics_->Collect(), "baton_coordinator_rpc_duration_seconds",
                    {{"method", "baton.v1.JobService/GetJob"}, {"code", "NOT_FOUND"}}, "count"),
              Optional(1.0));
}

}  // namespace
}  // namespace baton::coordinator

namespace baton::coordinator {
namespace {

TEST_F(CoordinatorMetricsTest, WorkerLeasesAndLossesByCause) {
  baton::v1::Register reg;
  reg.set_protocol_version(kProtocolVersion);
  reg.mutable_resources()->set_slots(1);
  for (const std::string id : {"w1", "w2", "w3"}) {
    reg.set_worker_id(id);
    ASSERT_OK(coordinator_->OnWorkerConnected(reg, "10.0.0.1", std::make_shared<NullChannel>()));
  }
  clock_.Advance(absl::Seconds(4));
  auto scrape = metrics_->Collect();
  EXPECT_THAT(
      Value(scrape, "baton_coordinator_worker_lease_remaining_seconds", {{"worker_id", "w1"}}),
      Optional(DoubleNear(6.0, 1e-9)));  // default lease 10 s, renewed 4 s ago
  EXPECT_THAT(Value(scrape, "baton_coordinator_worker_losses_total", {{"cause", "lease_expired"}}),
              Optional(0.0));
  // w3's stream closes; w1 and w2 fall silent past their lease and its margin.
  coordinator_->OnWorkerDisconnected("w3", 3);
  clock_.Advance(absl::Seconds(8));
  coordinator_->ReconcileOnce();
  scrape = metrics_->Collect();
  EXPECT_THAT(Value(scrape, "baton_coordinator_worker_losses_total", {{"cause", "lease_expired"}}),
              Optional(2.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_worker_losses_total", {{"cause", "stream_closed"}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_worker_losses_total", {{"cause", "lease_revoked"}}),
              Optional(0.0));
  EXPECT_EQ(
      Value(scrape, "baton_coordinator_worker_lease_remaining_seconds", {{"worker_id", "w1"}}),
      std::nullopt);  // lost: no lease left to show
}

TEST_F(CoordinatorMetricsTest, CountsRefusedWorkerEventsAndNoRefusedChanges) {
  baton::v1::Register reg;
  reg.set_protocol_version(kProtocolVersion);
  reg.mutable_resources()->set_slots(1);
  reg.set_worker_id("w1");
  ASSERT_OK(coordinator_->OnWorkerConnected(reg, "10.0.0.1", std::make_shared<NullChannel>()));
  auto scrape = metrics_->Collect();
  EXPECT_THAT(Value(scrape, "baton_coordinator_worker_events_refused_total", {{"event", "Drain"}}),
              Optional(0.0));
  // A Draining that arrives after the stream closed: the lifecycle has no Drain from LOST.
  coordinator_->OnWorkerDisconnected("w1", 1);
  workers_->SetDraining("w1");
  scrape = metrics_->Collect();
  EXPECT_THAT(Value(scrape, "baton_coordinator_worker_events_refused_total", {{"event", "Drain"}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_worker_events_refused_total", {{"event", "Lose"}}),
              Optional(0.0));
  // Nothing was refused by the coordinator's own rules.
  EXPECT_THAT(Value(scrape, "baton_coordinator_changes_refused_total", {}), Optional(0.0));
}

TEST_F(CoordinatorMetricsTest, PerQueueSeriesOnACoordinatorWithQueues) {
  auto scrape = metrics_->Collect();
  EXPECT_EQ(Value(scrape, "baton_coordinator_queue_pending_jobs", {{"queue", "a"}}),
            std::nullopt);  // no queues, no series
  absl::StatusOr<QueueSet> queues = ParseQueueFile(
      "queues:\n  - {name: a, cohort: c, quota: {slots: 1}, users: [\"*\"]}\n"
      "  - {name: b, cohort: c, quota: {slots: 1}, users: [\"*\"]}\n",
      "queues.yaml");
  ASSERT_OK(queues);
  coordinator_->SetQueues(*queues);
  baton::v1::Register reg;
  reg.set_protocol_version(kProtocolVersion);
  reg.mutable_resources()->set_slots(1);
  for (const std::string id : {"w1", "w2"}) {
    reg.set_worker_id(id);
    ASSERT_OK(coordinator_->OnWorkerConnected(reg, "10.0.0.1", std::make_shared<NullChannel>()));
  }
  baton::v1::JobSpec spec;
  spec.set_name("q");
  spec.mutable_command()->add_argv("/bin/true");
  spec.mutable_workers()->set_min(1);
  spec.set_queue("a");
  for (int i = 0; i < 3; ++i) ASSERT_OK(coordinator_->SubmitJob(spec));  // 2 run: a borrows b's
  scrape = metrics_->Collect();
  EXPECT_THAT(Value(scrape, "baton_coordinator_queue_pending_jobs", {{"queue", "a"}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_queue_admitted_jobs", {{"queue", "a"}}),
              Optional(2.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_queue_used_slots", {{"queue", "a"}}), Optional(2.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_queue_nominal_slots", {{"queue", "a"}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_queue_borrowed_slots", {{"queue", "a"}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_queue_used_slots", {{"queue", "b"}}), Optional(0.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_queue_preemptions_total", {{"queue", "a"}}),
              Optional(0.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_restarts_total", {{"cause", "Preempted"}}),
              Optional(0.0));  // exists from the start
}

}  // namespace
}  // namespace baton::coordinator
