#include "coordinator/job_manager.h"

#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/clock.h"
#include "common/metrics_testing.h"
#include "common/status_matchers.h"
#include "coordinator/store/store.h"

namespace baton::coordinator {
namespace {

using ::baton::metrics_testing::Point;
using ::testing::HasSubstr;

class JobManagerTest : public ::testing::Test {
 protected:
  // A JobManager over store_, loaded as a (re)starting coordinator loads it.
  std::unique_ptr<JobManager> Loaded() {
    auto jobs = std::make_unique<JobManager>(store_.get(), &clock_);
    EXPECT_OK(jobs->Load());
    return jobs;
  }
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
    ASSERT_OK(store);
    store_ = std::move(*store);
    jobs_ = Loaded();
  }

  // A submitted job moved to RUNNING in generation 1; its start time is now.
  std::string RunningJob() {
    baton::v1::JobSpec spec;
    spec.set_name("j");
    spec.mutable_command()->add_argv("/bin/true");
    spec.mutable_workers()->set_min(1);
    absl::StatusOr<baton::v1::Job> job = jobs_->Submit(spec);
    EXPECT_OK(job);
    if (!job.ok()) return "";
    jobs_->Mutable(job->id())->set_generation(1);
    EXPECT_OK(jobs_->Transition(job->id(), JobState::kRendezvous, "Scheduled", ""));
    EXPECT_OK(jobs_->Transition(job->id(), JobState::kRunning, "Started", ""));
    return job->id();
  }

  baton::v1::Job Get(JobManager& jobs, const std::string& id) {
    absl::StatusOr<baton::v1::Job> job = jobs.Get(id);
    EXPECT_OK(job);
    return job.ok() ? *job : baton::v1::Job();
  }

  std::vector<baton::v1::JobEvent> Stragglers(const baton::v1::Job& job) {
    std::vector<baton::v1::JobEvent> out;
    for (const baton::v1::JobEvent& e : job.events()) {
      if (e.reason() == "Straggler") out.push_back(e);
    }
    return out;
  }

  FakeClock clock_;
  std::unique_ptr<Store> store_;
  std::unique_ptr<JobManager> jobs_;
};

TEST_F(JobManagerTest, ResultGoodputIsEvaluatedNowUntilTheJobEndsThenFrozen) {
  const std::string id = RunningJob();
  EXPECT_EQ(Get(*jobs_, id).result().goodput(), 0);
  // Rank 0: 10 steps at 0.5 s, then a restore to step 8 and steps 9..12 (only 11..12 new).
  ASSERT_OK(jobs_->AddMetrics(id, {Point(1, 0, 10, 0.5), Point(1, 1, 10, 5.0)}));
  clock_.Advance(absl::Seconds(10));
  EXPECT_DOUBLE_EQ(Get(*jobs_, id).result().goodput(), 5.0 / 10);
  ASSERT_OK(jobs_->AddMetrics(id, {Point(1, 0, 8, 1.0), Point(1, 0, 12, 1.0)}));
  clock_.Advance(absl::Seconds(4));
  EXPECT_DOUBLE_EQ(Get(*jobs_, id).result().goodput(), 7.0 / 14);

  ASSERT_OK(jobs_->Transition(id, JobState::kSucceeded, "Completed", ""));
  clock_.Advance(absl::Hours(1));
  const baton::v1::Job done = Get(*jobs_, id);
  EXPECT_DOUBLE_EQ(done.result().goodput(), 7.0 / 14);
  EXPECT_EQ(done.result().wall_time().seconds(), 14);
  // Persisted with the record.
  const std::unique_ptr<JobManager> reloaded = Loaded();
  EXPECT_DOUBLE_EQ(Get(*reloaded, id).result().goodput(), 7.0 / 14);
}

TEST_F(JobManagerTest, LoadRebuildsTheProductiveTimeOfARunningJob) {
  const std::string id = RunningJob();
  ASSERT_OK(jobs_->AddMetrics(id, {Point(1, 0, 10, 0.5)}));
  clock_.Advance(absl::Seconds(20));
  const std::unique_ptr<JobManager> reloaded = Loaded();
  EXPECT_DOUBLE_EQ(Get(*reloaded, id).result().goodput(), 5.0 / 20);
  // And continues from it: steps up to 10 are not counted again.
  ASSERT_OK(reloaded->AddMetrics(id, {Point(1, 0, 10, 0.5), Point(1, 0, 15, 1.0)}));
  EXPECT_DOUBLE_EQ(Get(*reloaded, id).result().goodput(), 10.0 / 20);
}

TEST_F(JobManagerTest, RecordsAStragglerOncePerGenerationAndRank) {
  const std::string id = RunningJob();
  // Ranks 0 and 2 at 1 s/step, rank 1 at 1.5 s/step. At rank 1's first point only ranks 0
  // and 1 had reported (ratio 1.5 / 1.25 = 1.2); from its second point on it is 1.5x the
  // median, so its third point above the threshold is at step 4: reported once, then.
  for (int64_t step = 1; step <= 6; ++step) {
    ASSERT_OK(jobs_->AddMetrics(
        id, {Point(1, 0, step, 1.0), Point(1, 1, step, 1.5), Point(1, 2, step, 1.0)}));
    EXPECT_EQ(Stragglers(Get(*jobs_, id)).size(), step < 4 ? 0u : 1u) << "step " << step;
  }
  std::vector<baton::v1::JobEvent> events = Stragglers(Get(*jobs_, id));
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].generation(), 1);
  EXPECT_THAT(events[0].message(), HasSubstr("rank 1 is a straggler"));
  EXPECT_THAT(events[0].message(), HasSubstr("1.50x the median"));

  // A restarted coordinator remembers it reported rank 1 in this generation.
  const std::unique_ptr<JobManager> reloaded = Loaded();
  ASSERT_OK(reloaded->AddMetrics(
      id, {Point(1, 0, 7, 1.0), Point(1, 1, 7, 1.5), Point(1, 2, 7, 1.0)}));
  EXPECT_EQ(Stragglers(Get(*reloaded, id)).size(), 1u);

  // A new generation reports it again.
  ASSERT_OK(reloaded->Transition(id, JobState::kRestarting, "WorkerLost", ""));
  reloaded->Mutable(id)->set_generation(2);
  ASSERT_OK(reloaded->Transition(id, JobState::kRendezvous, "Restarted", ""));
  ASSERT_OK(reloaded->Transition(id, JobState::kRunning, "Started", ""));
  for (int64_t step = 8; step <= 11; ++step) {
    ASSERT_OK(reloaded->AddMetrics(
        id, {Point(2, 0, step, 1.0), Point(2, 1, step, 1.5), Point(2, 2, step, 1.0)}));
  }
  events = Stragglers(Get(*reloaded, id));
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[1].generation(), 2);
  EXPECT_THAT(events[1].message(), HasSubstr("rank 1"));
}

TEST_F(JobManagerTest, AShortSlowdownIsNotAStraggler) {
  const std::string id = RunningJob();
  ASSERT_OK(jobs_->AddMetrics(id, {Point(1, 0, 1, 1.0), Point(1, 1, 1, 2.0)}));
  ASSERT_OK(jobs_->AddMetrics(id, {Point(1, 0, 2, 1.0), Point(1, 1, 2, 2.0)}));
  // Two ranks: the median is their mean, so rank 1 at 2 s vs 1 s is 1.33x for two points;
  // a fast third one brings its mean to 1.43 s against a median of 1.22 s: 1.18x.
  ASSERT_OK(jobs_->AddMetrics(id, {Point(1, 0, 3, 1.0), Point(1, 1, 3, 0.3)}));
  EXPECT_TRUE(Stragglers(Get(*jobs_, id)).empty());
}

}  // namespace
}  // namespace baton::coordinator
