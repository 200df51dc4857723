#include "coordinator/jobs/job_manager.h"

#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "common/spec/message_limits.h"
#include "common/testing/metrics_testing.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/testing/fake_clock.h"
#include "coordinator/store/store.h"
#include "coordinator/store/testing/faulty_store.h"
#include "coordinator/testing/recording_sink.h"

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
    baton::v1::Job record = *jobs_->Peek(job->id());
    record.set_generation(1);
    EXPECT_OK(jobs_->Transition(job->id(), JobState::kRendezvous, "Scheduled", "", &record));
    EXPECT_OK(jobs_->Transition(job->id(), JobState::kRunning, "Started", ""));
    return job->id();
  }

  // The job as a client sees it after the coordinator's next group commit.
  baton::v1::Job Get(JobManager& jobs, const std::string& id) {
    EXPECT_OK(jobs.Flush());
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

// Get reads the job's events from the store; GetWithoutEvents is the same job without
// them (what submit and cancel answer), read from memory only.
TEST_F(JobManagerTest, GetWithoutEventsIsGetLessItsEvents) {
  const std::string id = RunningJob();
  baton::v1::Job with_events = Get(*jobs_, id);
  EXPECT_GE(with_events.events_size(), 3);  // Submitted, Scheduled, Started.
  absl::StatusOr<baton::v1::Job> without = jobs_->GetWithoutEvents(id);
  ASSERT_OK(without);
  EXPECT_EQ(without->events_size(), 0);
  with_events.clear_events();
  EXPECT_EQ(without->SerializeAsString(), with_events.SerializeAsString());
  EXPECT_EQ(jobs_->GetWithoutEvents("j-404").status().code(), absl::StatusCode::kNotFound);
}

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
  ASSERT_OK(jobs_->Flush());
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
  baton::v1::Job record = *reloaded->Peek(id);
  record.set_generation(2);
  ASSERT_OK(reloaded->Transition(id, JobState::kRendezvous, "Restarted", "", &record));
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

namespace baton::coordinator {
namespace {

baton::v1::JobSpec NamedSpec(const std::string& name) {
  baton::v1::JobSpec spec;
  spec.set_name(name);
  spec.mutable_command()->add_argv("/bin/true");
  spec.mutable_workers()->set_min(1);
  return spec;
}

// One tenant cannot fill the queue: past max_active_jobs_per_owner unfinished jobs its
// submits are refused (others' are not), a retry of a submit that created its job is still
// answered, and a job that ends frees a place.
TEST_F(JobManagerTest, BoundsEachOwnersUnfinishedJobs) {
  JobManagerOptions options;
  options.max_active_jobs_per_owner = 2;
  JobManager jobs(store_.get(), &clock_, options);
  ASSERT_OK(jobs.Load());
  baton::v1::JobSpec spec;
  spec.set_name("j");
  spec.mutable_command()->add_argv("/bin/true");
  spec.mutable_workers()->set_min(1);
  absl::StatusOr<baton::v1::Job> first = jobs.Submit(spec, "r1", "alice");
  ASSERT_OK(first);
  ASSERT_OK(jobs.Submit(spec, "r2", "alice"));
  EXPECT_THAT(jobs.Submit(spec, "r3", "alice"),
              StatusIs(absl::StatusCode::kResourceExhausted,
                       ::testing::HasSubstr("(--max_jobs_per_user=2)")));
  absl::StatusOr<baton::v1::Job> retried = jobs.Submit(spec, "r1", "alice");
  ASSERT_OK(retried);
  EXPECT_EQ(retried->id(), first->id());
  ASSERT_OK(jobs.Submit(spec, "b1", "bob"));
  ASSERT_OK(jobs.Transition(first->id(), JobState::kCancelled, "Cancelled", ""));
  EXPECT_OK(jobs.Submit(spec, "r3", "alice"));
}

class JobManagerDurabilityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<Store>> base = Store::Open(":memory:");
    ASSERT_OK(base);
    store_ = std::make_unique<FaultyStore>(std::move(*base));
    jobs_ = std::make_unique<JobManager>(store_.get(), &clock_);
    ASSERT_OK(jobs_->Load());
  }
  FakeClock clock_;
  std::unique_ptr<FaultyStore> store_;
  std::unique_ptr<JobManager> jobs_;
};

TEST_F(JobManagerDurabilityTest, ARetriedSubmitReturnsTheSameJob) {
  absl::StatusOr<baton::v1::Job> first = jobs_->Submit(NamedSpec("a"), "req-1");
  ASSERT_OK(first);
  EXPECT_EQ(first->request_id(), "req-1");
  absl::StatusOr<baton::v1::Job> again = jobs_->Submit(NamedSpec("a"), "req-1");
  ASSERT_OK(again);
  EXPECT_EQ(again->id(), first->id());
  EXPECT_EQ(jobs_->List({}, 0).size(), 1u);
  EXPECT_THAT(jobs_->Submit(NamedSpec("b"), "req-1"),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr(first->id())));

  // A restarted coordinator still knows the request id.
  JobManager reloaded(store_.get(), &clock_);
  ASSERT_OK(reloaded.Load());
  absl::StatusOr<baton::v1::Job> after_restart = reloaded.Submit(NamedSpec("a"), "req-1");
  ASSERT_OK(after_restart);
  EXPECT_EQ(after_restart->id(), first->id());
  // Without a request id every call is a new job.
  ASSERT_OK(reloaded.Submit(NamedSpec("a")));
  EXPECT_EQ(reloaded.List({}, 0).size(), 2u);
}

TEST_F(JobManagerDurabilityTest, TheOwnerIsRecordedAndPartOfTheRequestId) {
  absl::StatusOr<baton::v1::Job> job = jobs_->Submit(NamedSpec("a"), "req-1", "alice");
  ASSERT_OK(job);
  EXPECT_EQ(job->owner(), "alice");
  // Another user's retry with the same request id does not get alice's job.
  EXPECT_THAT(jobs_->Submit(NamedSpec("a"), "req-1", "bob"),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("different spec or owner")));
  JobManager reloaded(store_.get(), &clock_);
  ASSERT_OK(reloaded.Load());
  absl::StatusOr<baton::v1::Job> after_restart = reloaded.Get(job->id());
  ASSERT_OK(after_restart);
  EXPECT_EQ(after_restart->owner(), "alice");
}

TEST_F(JobManagerDurabilityTest, ASubmitWhoseCommitFailsCreatesNothing) {
  store_->FailWrite(1);
  EXPECT_THAT(jobs_->Submit(NamedSpec("a"), "req-1"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("injected")));
  EXPECT_TRUE(jobs_->List({}, 0).empty());
  EXPECT_THAT(jobs_->store_error(),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("injected")));
  // Latched: the store works again, but nothing more is written by this manager.
  EXPECT_THAT(jobs_->Submit(NamedSpec("b")),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("failed earlier")));
  JobManager reloaded(store_.get(), &clock_);
  ASSERT_OK(reloaded.Load());
  EXPECT_TRUE(reloaded.List({}, 0).empty());
  // The job number was not used up: the next job is the first.
  absl::StatusOr<baton::v1::Job> job = reloaded.Submit(NamedSpec("a"), "req-1");
  ASSERT_OK(job);
  EXPECT_EQ(job->id(), "j-000001");
}

TEST_F(JobManagerDurabilityTest, AFailedTransitionLeavesMemoryAndWatchersAlone) {
  absl::StatusOr<baton::v1::Job> job = jobs_->Submit(NamedSpec("a"));
  ASSERT_OK(job);
  auto sink = std::make_shared<RecordingSink<baton::v1::JobUpdate>>();
  ASSERT_OK(jobs_->Watch(job->id(), 0, sink));
  const size_t seen = sink->items.size();
  store_->FailWrite(1);
  EXPECT_THAT(jobs_->Transition(job->id(), JobState::kCancelled, "Cancelled", "bye"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("injected")));
  EXPECT_EQ(*jobs_->State(job->id()), JobState::kQueued);
  EXPECT_EQ(jobs_->Peek(job->id())->state(), baton::v1::JOB_STATE_QUEUED);
  EXPECT_EQ(sink->items.size(), seen) << "a watcher heard of an uncommitted change";
  EXPECT_FALSE(sink->finished);
}

baton::v1::JobEvent Event(const std::string& reason) {
  baton::v1::JobEvent e;
  e.set_reason(reason);
  e.set_message(reason);
  return e;
}

// Staged changes: in Peek at once; written, numbered and streamed by one Flush for every
// job (one transaction), or first thing in the job's next Update.
TEST_F(JobManagerDurabilityTest, StagedChangesAreWrittenByFlushOrTheNextUpdate) {
  absl::StatusOr<baton::v1::Job> a = jobs_->Submit(NamedSpec("a"));
  absl::StatusOr<baton::v1::Job> b = jobs_->Submit(NamedSpec("b"));
  ASSERT_OK(a);
  ASSERT_OK(b);
  auto sink = std::make_shared<RecordingSink<baton::v1::JobUpdate>>();
  ASSERT_OK(jobs_->Watch(a->id(), 0, sink));
  const size_t seen = sink->items.size();
  const int64_t writes = store_->writes();
  for (const std::string& id : {a->id(), b->id()}) {
    ASSERT_OK(jobs_->Stage(id, [](baton::v1::Job& j) { j.set_master_port(1); }, {Event("X")}));
  }
  ASSERT_OK(jobs_->Stage(a->id(), [](baton::v1::Job& j) { j.set_master_port(2); }, {Event("Y")}));
  EXPECT_EQ(jobs_->Peek(a->id())->master_port(), 2);
  EXPECT_EQ(jobs_->PeekWritten(a->id())->master_port(), 0);
  EXPECT_EQ(jobs_->Get(a->id())->master_port(), 0);
  EXPECT_EQ(sink->items.size(), seen) << "a watcher heard of an unwritten change";
  EXPECT_EQ(store_->writes(), writes);
  EXPECT_EQ(jobs_->staged_jobs(), 2u);

  ASSERT_OK(jobs_->Flush());
  EXPECT_EQ(store_->writes(), writes + 1);  // both jobs, one transaction
  EXPECT_EQ(jobs_->staged_jobs(), 0u);
  EXPECT_EQ(jobs_->Get(a->id())->master_port(), 2);
  EXPECT_EQ(jobs_->Get(b->id())->master_port(), 1);
  ASSERT_EQ(sink->items.size(), seen + 2);
  EXPECT_EQ(sink->items[seen].event().reason(), "X");
  EXPECT_EQ(sink->items[seen + 1].event().reason(), "Y");
  EXPECT_EQ(sink->items[seen + 1].seq(), sink->items[seen].seq() + 1);

  // Staged, then an Update: one transaction, the staged events first.
  ASSERT_OK(jobs_->Stage(a->id(), [](baton::v1::Job& j) { j.set_master_port(3); }, {Event("Z")}));
  baton::v1::Job record = *jobs_->Peek(a->id());
  record.set_master_addr("h");
  ASSERT_OK(jobs_->Update(record, {Event("U")}));
  EXPECT_EQ(store_->writes(), writes + 2);
  EXPECT_EQ(jobs_->staged_jobs(), 0u);
  const baton::v1::Job got = *jobs_->Get(a->id());
  EXPECT_EQ(got.master_port(), 3);
  EXPECT_EQ(got.master_addr(), "h");
  ASSERT_EQ(sink->items.size(), seen + 4);
  EXPECT_EQ(sink->items[seen + 2].event().reason(), "Z");
  EXPECT_EQ(sink->items[seen + 3].event().reason(), "U");

  // Restarted from the store: what was written, nothing staged.
  ASSERT_OK(jobs_->Stage(b->id(), [](baton::v1::Job& j) { j.set_master_port(9); }));
  JobManager reloaded(store_.get(), &clock_);
  ASSERT_OK(reloaded.Load());
  EXPECT_EQ(reloaded.Peek(b->id())->master_port(), 1);
}

TEST_F(JobManagerDurabilityTest, StageMayNotChangeTheStateAndAFailedFlushKeepsTheChanges) {
  absl::StatusOr<baton::v1::Job> a = jobs_->Submit(NamedSpec("a"));
  ASSERT_OK(a);
  EXPECT_THAT(
      jobs_->Stage(a->id(), [](baton::v1::Job& j) { j.set_state(baton::v1::JOB_STATE_RUNNING); }),
      StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("state")));
  EXPECT_EQ(jobs_->staged_jobs(), 0u);
  EXPECT_EQ(jobs_->Peek(a->id())->state(), baton::v1::JOB_STATE_QUEUED);
  EXPECT_THAT(jobs_->Stage("j-999999", [](baton::v1::Job&) {}),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("not found")));

  ASSERT_OK(jobs_->Stage(a->id(), [](baton::v1::Job& j) { j.set_master_port(5); }));
  store_->FailWrite(1);
  EXPECT_THAT(jobs_->Flush(), StatusIs(absl::StatusCode::kUnavailable, HasSubstr("injected")));
  EXPECT_EQ(jobs_->staged_jobs(), 1u);
  EXPECT_EQ(jobs_->PeekWritten(a->id())->master_port(), 0);
  EXPECT_EQ(jobs_->Peek(a->id())->master_port(), 5);
}

TEST_F(JobManagerDurabilityTest, IdsStayInSubmissionOrderPastAMillionJobs) {
  ASSERT_OK(store_->SetMeta("next_job_number", "999999"));
  JobManager jobs(store_.get(), &clock_);
  ASSERT_OK(jobs.Load());
  absl::StatusOr<baton::v1::Job> older = jobs.Submit(NamedSpec("older"));
  absl::StatusOr<baton::v1::Job> newer = jobs.Submit(NamedSpec("newer"));
  ASSERT_OK(older);
  ASSERT_OK(newer);
  EXPECT_EQ(older->id(), "j-999999");
  EXPECT_EQ(newer->id(), "j-1000000");
  // Oldest first for the scheduler's FIFO, newest first for listings, before and after a
  // restart.
  for (JobManager* m : {&jobs}) {
    EXPECT_THAT(m->JobsIn({JobState::kQueued}), ::testing::ElementsAre("j-999999", "j-1000000"));
    std::vector<baton::v1::Job> listed = m->List({}, 0);
    ASSERT_EQ(listed.size(), 2u);
    EXPECT_EQ(listed[0].id(), "j-1000000");
  }
  JobManager reloaded(store_.get(), &clock_);
  ASSERT_OK(reloaded.Load());
  EXPECT_THAT(reloaded.JobsIn({JobState::kQueued}),
              ::testing::ElementsAre("j-999999", "j-1000000"));
  EXPECT_EQ(reloaded.List({}, 1)[0].id(), "j-1000000");
}

}  // namespace
}  // namespace baton::coordinator

namespace baton::coordinator {
namespace {

TEST(JobManagerLimitsTest, OversizedSpecsAreRejectedAtSubmit) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
  ASSERT_OK(store);
  FakeClock clock;
  JobManager jobs(store->get(), &clock);
  ASSERT_OK(jobs.Load());
  baton::v1::JobSpec spec = NamedSpec("big");
  (*spec.mutable_env())["BLOB"] = std::string(4 << 20, 'x');  // 4 MiB
  EXPECT_THAT(jobs.Submit(spec), StatusIs(absl::StatusCode::kInvalidArgument,
                                          HasSubstr("env.BLOB: 4194304 bytes is too large")));
  spec = NamedSpec("many");
  for (int i = 0; i <= kMaxEnvVars; ++i) (*spec.mutable_env())[absl::StrCat("V", i)] = "1";
  EXPECT_THAT(jobs.Submit(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("env: 1025 variables")));
  spec = NamedSpec("args");
  for (int i = 0; i < 40; ++i) spec.mutable_command()->add_argv(std::string(30 << 10, 'a'));
  EXPECT_THAT(jobs.Submit(spec),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("spec: ")));
  EXPECT_TRUE(jobs.List({}, 0).empty());
}

TEST(JobManagerLimitsTest, OverlongLogLinesAreCut) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
  ASSERT_OK(store);
  FakeClock clock;
  JobManager jobs(store->get(), &clock);
  ASSERT_OK(jobs.Load());
  absl::StatusOr<baton::v1::Job> job = jobs.Submit(NamedSpec("a"));
  ASSERT_OK(job);
  baton::v1::LogLine line;
  line.set_text(std::string(kMaxLogLineBytes + 1000, 'y'));
  ASSERT_OK(jobs.AddLogs(job->id(), {line}));
  absl::StatusOr<std::vector<baton::v1::LogLine>> stored = (*store)->ReadLogs(job->id(), -1, 0, 0);
  ASSERT_OK(stored);
  ASSERT_EQ(stored->size(), 1u);
  EXPECT_EQ((*stored)[0].text().size(), kMaxLogLineBytes + std::string(" [line truncated]").size());
}

}  // namespace
}  // namespace baton::coordinator

namespace baton::coordinator {
namespace {

TEST(JobManagerRetentionTest, FinishedJobsGoAfterJobRetention) {
  absl::StatusOr<std::unique_ptr<Store>> store = Store::Open(":memory:");
  ASSERT_OK(store);
  FakeClock clock;
  JobManagerOptions options;
  options.retention.job_retention = absl::Hours(24);
  options.retention.prune_interval = absl::Minutes(1);
  JobManager jobs(store->get(), &clock, options);
  ASSERT_OK(jobs.Load());
  absl::StatusOr<baton::v1::Job> done = jobs.Submit(NamedSpec("done"), "req-done");
  absl::StatusOr<baton::v1::Job> queued = jobs.Submit(NamedSpec("queued"));
  ASSERT_OK(done);
  ASSERT_OK(queued);
  ASSERT_OK(jobs.Transition(done->id(), JobState::kCancelled, "Cancelled", "bye"));

  clock.Advance(absl::Hours(23));
  ASSERT_OK(jobs.Prune(10));
  EXPECT_EQ(jobs.List({}, 0).size(), 2u);
  clock.Advance(absl::Hours(1));
  // A late report for the finished job, staged when it goes: it goes with it.
  ASSERT_OK(jobs.AddMetrics(done->id(), {Point(1, 0, 5, 0.5)}));
  ASSERT_OK(jobs.Prune(10));
  EXPECT_EQ(jobs.staged_jobs(), 0u);
  ASSERT_OK(jobs.Flush());
  ASSERT_EQ(jobs.List({}, 0).size(), 1u);
  EXPECT_EQ(jobs.List({}, 0)[0].id(), queued->id());  // never a job that is not finished
  EXPECT_THAT(jobs.Get(done->id()), StatusIs(absl::StatusCode::kNotFound, HasSubstr("not found")));
  // Gone from disk too, and its request id is free again.
  JobManager reloaded(store->get(), &clock, options);
  ASSERT_OK(reloaded.Load());
  EXPECT_EQ(reloaded.List({}, 0).size(), 1u);
  absl::StatusOr<baton::v1::Job> again = jobs.Submit(NamedSpec("done"), "req-done");
  ASSERT_OK(again);
  EXPECT_NE(again->id(), done->id());
}

}  // namespace
}  // namespace baton::coordinator
