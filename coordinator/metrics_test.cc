#include "coordinator/metrics.h"

#include <map>
#include <optional>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/status_matchers.h"
#include "coordinator/store/store.h"
#include "coordinator/worker_registry.h"

namespace baton::coordinator {
namespace {

using ::testing::DoubleNear;
using ::testing::Optional;

// One series of a scrape: a counter's or gauge's value, or a histogram's count ("count")
// or sum ("sum"). nullopt if it is not exported.
std::optional<double> Value(const std::vector<prometheus::MetricFamily>& families,
                            const std::string& name,
                            const std::map<std::string, std::string>& labels,
                            const std::string& what = "") {
  for (const prometheus::MetricFamily& f : families) {
    if (f.name != name) continue;
    for (const prometheus::ClientMetric& m : f.metric) {
      std::map<std::string, std::string> got;
      for (const auto& l : m.label) got[l.name] = l.value;
      if (got != labels) continue;
      switch (f.type) {
        case prometheus::MetricType::Counter:
          return m.counter.value;
        case prometheus::MetricType::Gauge:
          return m.gauge.value;
        case prometheus::MetricType::Histogram:
          return what == "sum" ? m.histogram.sample_sum
                               : static_cast<double>(m.histogram.sample_count);
        default:
          return std::nullopt;
      }
    }
  }
  return std::nullopt;
}

baton::v1::MetricPoint Point(int64_t generation, int32_t rank, int64_t step, double step_s) {
  baton::v1::MetricPoint p;
  p.set_generation(generation);
  p.set_rank(rank);
  p.set_step(step);
  (*p.mutable_values())["time_step_s"] = step_s;
  return p;
}

class CoordinatorMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
    ASSERT_OK(store);
    store_ = std::move(*store);
    jobs_ = std::make_unique<JobManager>(store_.get(), &clock_);
    ASSERT_OK(jobs_->Load());
    workers_ = std::make_unique<WorkerRegistry>(&clock_);
    coordinator_ = std::make_unique<Coordinator>(jobs_.get(), workers_.get(), &clock_,
                                                 CoordinatorOptions());
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

TEST_F(CoordinatorMetricsTest, FollowsAJobThroughItsStatesRestartsAndGoodput) {
  const std::string id = Submit();
  auto scrape = metrics_->Collect();
  EXPECT_THAT(Value(scrape, "baton_coordinator_jobs", {{"state", "queued"}}), Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_queue_length", {}), Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_state", {{"job_id", id}, {"state", "queued"}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_workers", {{"state", "ready"}}), Optional(0.0));

  clock_.Advance(absl::Seconds(3));
  Move(id, JobState::kRendezvous, "Scheduled");
  clock_.Advance(absl::Seconds(2));
  Move(id, JobState::kRunning, "Started");
  // Rank 0 at 0.5 s/step, rank 1 at 1.0 s/step; 10 steps each.
  ASSERT_OK(jobs_->AddMetrics(id, {Point(1, 0, 10, 0.5), Point(1, 1, 10, 1.0)}));
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

  Move(id, JobState::kRestarting, "WorkerLost");
  clock_.Advance(absl::Seconds(1));
  Move(id, JobState::kRendezvous, "Rescheduled");
  clock_.Advance(absl::Seconds(1));
  Move(id, JobState::kRunning, "Started");
  // Generation 2 restored step 8: steps 9..10 are recomputed (not productive), 11..14 are.
  ASSERT_OK(jobs_->AddMetrics(id, {Point(2, 0, 8, 0.5), Point(2, 0, 14, 0.5)}));
  scrape = metrics_->Collect();
  EXPECT_THAT(Value(scrape, "baton_coordinator_restarts_total", {{"cause", "WorkerLost"}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_restarts_total", {{"job_id", id}}),
              Optional(1.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_recovery_duration_seconds", {}, "sum"),
              Optional(2.0));
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_goodput_ratio", {{"job_id", id}}),
              Optional(DoubleNear((5.0 + 2.0) / 14, 1e-9)));
  // Only rank 0 reported in generation 2: no slowdown ratio.
  EXPECT_EQ(Value(scrape, "baton_rank_slowdown_ratio", {{"job_id", id}, {"rank", "0"}}),
            std::nullopt);

  Move(id, JobState::kSucceeded, "Completed");
  clock_.Advance(absl::Minutes(9));
  scrape = metrics_->Collect();
  EXPECT_THAT(Value(scrape, "baton_coordinator_job_state",
                    {{"job_id", id}, {"state", "succeeded"}}),
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
