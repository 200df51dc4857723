#include "coordinator/policy/admission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace baton::coordinator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using Kind = PendingReason::Kind;
using Phase = AdmissionJob::Phase;

// `n` workers "w01".."wNN" with `slots` free of `slots`.
std::vector<AdmissionWorker> Workers(int n, int slots, bool gpus = false) {
  std::vector<AdmissionWorker> out;
  for (int i = 1; i <= n; ++i) {
    char id[8];
    snprintf(id, sizeof(id), "w%02d", i);
    out.push_back({id, slots, slots, gpus});
  }
  return out;
}

AdmissionJob Pending(const std::string& id, const std::string& queue, int min, int max = 0,
                     int priority = 0, int64_t seq = 0) {
  AdmissionJob j;
  j.id = id;
  j.queue = queue;
  j.user = "u-" + id;
  j.min_workers = min;
  j.max_workers = max > 0 ? max : min;
  j.priority = priority;
  j.seq = seq;
  return j;
}

// A running job on `workers` (their slots are taken in the snapshot by the caller).
AdmissionJob Running(const std::string& id, const std::string& queue,
                     std::vector<std::string> workers, int priority = 0, int64_t seq = 0) {
  AdmissionJob j = Pending(id, queue, static_cast<int>(workers.size()), 0, priority, seq);
  j.phase = Phase::kRunning;
  j.workers = std::move(workers);
  return j;
}

// Takes the slots of every running job from the snapshot's workers.
void Occupy(AdmissionSnapshot& s) {
  for (const AdmissionJob& j : s.jobs) {
    if (j.phase == Phase::kPending) continue;
    for (const std::string& w : j.workers) {
      for (AdmissionWorker& x : s.workers) {
        if (x.id == w) x.free_slots -= j.slots_per_worker;
      }
    }
  }
}

const PendingReason& Why(const AdmissionPlan& p, const std::string& id) {
  static const PendingReason kNone;
  const Waiting* w = FindWaiting(p, id);
  EXPECT_NE(w, nullptr) << id << " is not pending";
  return w != nullptr ? w->why : kNone;
}

int Position(const AdmissionPlan& p, const std::string& id) {
  const Waiting* w = FindWaiting(p, id);
  return w != nullptr ? w->position : -1;
}

std::vector<std::string> Admitted(const AdmissionPlan& p) {
  std::vector<std::string> out;
  for (const Admission& a : p.admit) out.push_back(a.job_id);
  return out;
}

TEST(AdmissionTest, QuotaCapsAQueueWithoutACohort) {
  AdmissionSnapshot s;
  s.queues = {{"team-a", "", {4, 0}}};
  s.workers = Workers(8, 1);
  s.jobs = {Pending("a1", "team-a", 3, 0, 0, 1), Pending("a2", "team-a", 2, 0, 0, 2)};
  const AdmissionPlan p = PlanAdmission(s);
  EXPECT_THAT(Admitted(p), ElementsAre("a1"));
  ASSERT_NE(FindWaiting(p, "a2"), nullptr);
  EXPECT_EQ(Why(p, "a2").kind, Kind::kQuota);
  EXPECT_EQ(DescribePending(s.jobs[1], Why(p, "a2")),
            "needs 2 slots (2 workers x 1); queue team-a at 3/4 slots of its quota; it "
            "borrows from no cohort");
  EXPECT_EQ(Position(p, "a2"), 1);
}

TEST(AdmissionTest, AQueueBorrowsIdleQuotaInItsCohortAndSaysWhenItCannot) {
  AdmissionSnapshot s;
  s.queues = {{"team-a", "research", {4, 0}}, {"team-b", "research", {4, 0}}};
  s.workers = Workers(8, 1);
  s.jobs = {Pending("a1", "team-a", 6, 0, 0, 1), Pending("a2", "team-a", 3, 0, 0, 2)};
  const AdmissionPlan p = PlanAdmission(s);
  ASSERT_THAT(Admitted(p), ElementsAre("a1"));
  EXPECT_TRUE(p.admit[0].borrowing);
  EXPECT_EQ(Why(p, "a2").kind, Kind::kQuota);
  EXPECT_EQ(DescribePending(s.jobs[1], Why(p, "a2")),
            "needs 3 slots (3 workers x 1); queue team-a at 6/4 slots of its quota; "
            "borrowing unavailable in cohort research (2 slots spare)");
}

TEST(AdmissionTest, AJobThatIsNotPreemptibleNeverBorrows) {
  AdmissionSnapshot s;
  s.queues = {{"team-a", "research", {4, 0}}, {"team-b", "research", {4, 0}}};
  s.workers = Workers(8, 1);
  AdmissionJob rigid = Pending("rigid", "team-a", 2, 6, 0, 1);
  rigid.preemptible = false;
  AdmissionJob big = Pending("big", "team-a", 3, 0, 0, 2);
  big.preemptible = false;
  s.jobs = {rigid, big, Pending("flex", "team-a", 3, 0, 0, 3)};
  const AdmissionPlan p = PlanAdmission(s);
  // rigid takes its queue's own 4 slots, not 6: team-b could never take 2 of them back.
  ASSERT_THAT(Admitted(p), ElementsAre("rigid", "flex"));
  EXPECT_EQ(p.admit[0].worker_ids.size(), 4u);
  EXPECT_FALSE(p.admit[0].borrowing);
  EXPECT_TRUE(p.admit[1].borrowing);  // a preemptible job borrows team-b's idle quota
  EXPECT_EQ(Why(p, "big").kind, Kind::kQuota);
  EXPECT_EQ(DescribePending(s.jobs[1], Why(p, "big")),
            "needs 3 slots (3 workers x 1); queue team-a at 4/4 slots of its quota; it is not "
            "preemptible, so it does not borrow from cohort research (its lenders could not "
            "take the quota back)");
}

TEST(AdmissionTest, HigherPriorityFirstThenTheLessUsedQueueThenTheLighterUser) {
  AdmissionSnapshot s;
  s.queues = {{"a", "c", {4, 0}}, {"b", "c", {4, 0}}};
  s.workers = Workers(2, 1);
  s.jobs = {Pending("low", "a", 1, 0, 0, 1), Pending("high", "b", 1, 0, 5, 2),
            Pending("heavy-user", "a", 1, 0, 0, 3), Pending("light-user", "a", 1, 0, 0, 4)};
  s.user_usage["a"]["u-heavy-user"] = {4000, 0};
  s.user_usage["a"]["u-low"] = {1000, 0};
  s.user_usage["a"]["u-light-user"] = {10, 0};
  const AdmissionPlan p = PlanAdmission(s);
  EXPECT_THAT(Admitted(p), ElementsAre("high", "light-user"));
  // The rest wait in fair-share order within their queue.
  EXPECT_EQ(Position(p, "low"), 1);
  EXPECT_EQ(Position(p, "heavy-user"), 2);
}

TEST(AdmissionTest, AnElasticJobTakesUpToItsMaxWithinQuotaAndCapacity) {
  AdmissionSnapshot s;
  s.queues = {{"a", "", {5, 0}}};
  s.workers = Workers(8, 1);
  s.jobs = {Pending("e", "a", 2, 8)};
  const AdmissionPlan p = PlanAdmission(s);
  ASSERT_THAT(Admitted(p), ElementsAre("e"));
  EXPECT_THAT(p.admit[0].worker_ids, ElementsAre("w01", "w02", "w03", "w04", "w05"));
}

TEST(AdmissionTest, BackfillUsesOnlyWhatTheWaitingGangCannot) {
  AdmissionSnapshot s;
  s.queues = {{"a", "", {100, 0}}};
  s.workers = Workers(5, 4);
  // w01-w03 busy (3 of 4 slots each): the gang of 4 workers x 2 slots must wait, holding
  // the 4 workers closest to it: w04, w05 (all free), then w01, w02 (1 free each).
  s.jobs = {Running("r", "a", {"w01", "w02", "w03"}, 0, 0)};
  s.jobs[0].slots_per_worker = 3;
  Occupy(s);
  AdmissionJob gang = Pending("gang", "a", 4, 0, 0, 1);
  gang.slots_per_worker = 2;
  AdmissionJob small = Pending("small", "a", 1, 0, 0, 2);  // 1 slot: w03's, which is not held
  AdmissionJob medium = Pending("medium", "a", 1, 0, 0, 3);
  medium.slots_per_worker = 3;  // only w04 or w05 could take it: held
  s.jobs.push_back(gang);
  s.jobs.push_back(small);
  s.jobs.push_back(medium);
  const AdmissionPlan p = PlanAdmission(s);
  EXPECT_THAT(Admitted(p), ElementsAre("small"));
  EXPECT_THAT(p.admit[0].worker_ids, ElementsAre("w03"));
  EXPECT_EQ(Why(p, "gang").kind, Kind::kCapacity);
  EXPECT_EQ(Why(p, "medium").kind, Kind::kReserved);
  EXPECT_EQ(DescribePending(medium, Why(p, "medium")),
            "needs 3 slots (1 worker x 3); the free workers are held for job gang, which waits "
            "ahead of it");
  EXPECT_THAT(p.shrink, IsEmpty());
  EXPECT_THAT(p.preempt, IsEmpty());
}

TEST(AdmissionTest, AHigherPriorityJobShrinksAnElasticJobBeforePreemptingAnything) {
  AdmissionSnapshot s;
  s.queues = {{"a", "", {8, 0}}};
  s.workers = Workers(8, 1);
  AdmissionJob elastic = Running("elastic", "a", {"w01", "w02", "w03", "w04", "w05", "w06"});
  elastic.elastic = true;
  elastic.min_workers = 2;
  elastic.max_workers = 8;
  s.jobs = {elastic, Running("rigid", "a", {"w07", "w08"}, 0, 1),
            Pending("urgent", "a", 3, 0, 10, 2)};
  Occupy(s);
  const AdmissionPlan p = PlanAdmission(s);
  EXPECT_THAT(Admitted(p), IsEmpty());
  ASSERT_EQ(p.shrink.size(), 1u);
  EXPECT_EQ(p.shrink[0].job_id, "elastic");
  EXPECT_EQ(p.shrink[0].to_workers, 3);
  EXPECT_THAT(p.shrink[0].leaving, ElementsAre("w06", "w05", "w04"));
  EXPECT_THAT(p.preempt, IsEmpty());
  EXPECT_EQ(Why(p, "urgent").kind, Kind::kPreempting);
}

TEST(AdmissionTest, AReclaimPreemptsTheLowestPriorityBorrowerNeverANonPreemptibleOne) {
  AdmissionSnapshot s;
  s.queues = {{"a", "c", {4, 0}}, {"b", "c", {4, 0}}};
  s.workers = Workers(8, 1);
  AdmissionJob keep = Running("b-keep", "b", {"w01", "w02", "w03"}, 0, 1);
  keep.preemptible = false;
  s.jobs = {keep, Running("b-high", "b", {"w04", "w05"}, 5, 2),
            Running("b-low", "b", {"w06", "w07", "w08"}, 1, 3), Pending("a-job", "a", 3, 0, 0, 4)};
  Occupy(s);
  const AdmissionPlan p = PlanAdmission(s);
  EXPECT_THAT(Admitted(p), IsEmpty());
  ASSERT_EQ(p.preempt.size(), 1u);
  EXPECT_EQ(p.preempt[0].job_id, "b-low");
  EXPECT_EQ(p.preempt[0].why, "reclaim");
  EXPECT_EQ(p.preempt[0].for_job, "a-job");
}

TEST(AdmissionTest, NothingIsPreemptedInVainNorWhileAReleaseIsUnderWay) {
  AdmissionSnapshot s;
  s.queues = {{"a", "", {8, 0}}};
  s.workers = Workers(4, 1);
  s.jobs = {Running("low", "a", {"w01", "w02"}, 0, 1), Running("other", "a", {"w03", "w04"}, 9, 2),
            Pending("mid", "a", 4, 0, 5, 3)};
  Occupy(s);
  // Preempting "low" frees 2 of the 4 workers "mid" needs; "other" outranks it.
  AdmissionPlan p = PlanAdmission(s);
  EXPECT_THAT(p.preempt, IsEmpty());
  EXPECT_EQ(Why(p, "mid").kind, Kind::kCapacity);
  // With 2 workers needed, "low" goes; while it is releasing nothing more is planned.
  s.jobs[2].min_workers = s.jobs[2].max_workers = 2;
  p = PlanAdmission(s);
  ASSERT_EQ(p.preempt.size(), 1u);
  EXPECT_EQ(p.preempt[0].job_id, "low");
  EXPECT_EQ(p.preempt[0].why, "priority");
  s.jobs[0].phase = Phase::kReleasing;
  p = PlanAdmission(s);
  EXPECT_THAT(p.preempt, IsEmpty());
  EXPECT_EQ(Why(p, "mid").kind, Kind::kPreempting);
}

TEST(AdmissionTest, NobodyBorrowsWhileAQueueWaitsForItsOwnQuota) {
  AdmissionSnapshot s;
  s.queues = {{"a", "c", {4, 0}}, {"b", "c", {4, 0}}};
  s.workers = Workers(8, 1);
  // b borrows 2 of a's slots; a wants its 4 back (2 workers are free, 2 held by b).
  s.jobs = {Running("b-run", "b", {"w01", "w02", "w03", "w04", "w05", "w06"}, 0, 1),
            Pending("a-big", "a", 4, 0, 0, 2), Pending("b-more", "b", 1, 0, 0, 3)};
  s.jobs[0].preemptible = false;  // so a cannot reclaim by preemption
  Occupy(s);
  const AdmissionPlan p = PlanAdmission(s);
  EXPECT_THAT(Admitted(p), IsEmpty());  // the free workers are not lent out again
  EXPECT_EQ(Why(p, "a-big").kind, Kind::kQuota);
  EXPECT_THAT(DescribePending(s.jobs[1], Why(p, "a-big")),
              HasSubstr("queue a at 0/4 slots of its quota; the rest of its quota is "
                        "lent out in cohort c (2 slots spare): it is reclaimed from preemptible "
                        "borrowers"));
  EXPECT_EQ(Why(p, "b-more").kind, Kind::kQuota);
  EXPECT_THAT(DescribePending(s.jobs[2], Why(p, "b-more")),
              HasSubstr("borrowing paused in cohort c: queue a waits for its own quota"));
}

TEST(AdmissionTest, WhatIsFreedForAJobIsNotTakenByTheJobsAfterIt) {
  AdmissionSnapshot s;
  s.queues = {{"a", "", {4, 0}}};
  s.workers = Workers(6, 1);
  s.jobs = {Running("low", "a", {"w01", "w02", "w03"}, 0, 1), Pending("high", "a", 3, 0, 5, 2),
            Pending("small", "a", 1, 0, 0, 3)};
  Occupy(s);
  AdmissionPlan p = PlanAdmission(s);
  ASSERT_EQ(p.preempt.size(), 1u);
  EXPECT_EQ(p.preempt[0].job_id, "low");
  // "small" fits the quota left now (1 slot) but that slot is part of what "high" needs.
  EXPECT_THAT(Admitted(p), IsEmpty());
  // While "low" releases, "high" (nominated) still claims it; once it is gone, it starts.
  s.jobs[0].phase = Phase::kReleasing;
  s.jobs[1].nominated = true;
  p = PlanAdmission(s);
  EXPECT_THAT(Admitted(p), IsEmpty());
  s.jobs.erase(s.jobs.begin());
  s.workers = Workers(6, 1);
  p = PlanAdmission(s);
  EXPECT_THAT(Admitted(p), ElementsAre("high", "small"));
}

TEST(AdmissionTest, GpuJobsGoOnlyOnGpuWorkersAndCountAgainstTheGpuQuota) {
  AdmissionSnapshot s;
  s.queues = {{"a", "", {16, 2}}};
  s.workers = Workers(2, 4);
  std::vector<AdmissionWorker> gpu = Workers(2, 1, /*gpus=*/true);
  gpu[0].id = "g1";
  gpu[1].id = "g2";
  s.workers.insert(s.workers.end(), gpu.begin(), gpu.end());
  AdmissionJob train = Pending("train", "a", 2, 0, 0, 1);
  train.gpu = true;
  AdmissionJob more = Pending("more", "a", 1, 0, 0, 2);
  more.gpu = true;
  s.jobs = {train, more, Pending("cpu", "a", 2, 0, 0, 3)};
  const AdmissionPlan p = PlanAdmission(s);
  ASSERT_THAT(Admitted(p), ElementsAre("train", "cpu"));
  EXPECT_THAT(p.admit[0].worker_ids, ElementsAre("g1", "g2"));
  EXPECT_EQ(Why(p, "more").kind, Kind::kQuota);
  EXPECT_THAT(DescribePending(more, Why(p, "more")),
              HasSubstr("queue a at 2/16 slots, 2/2 GPUs of its quota"));
}

TEST(AdmissionTest, UnknownQueuesWaitAndSaySo) {
  AdmissionSnapshot s;
  s.workers = Workers(1, 1);
  s.jobs = {Pending("j", "gone", 1)};
  const AdmissionPlan p = PlanAdmission(s);
  EXPECT_EQ(DescribePending(s.jobs[0], Why(p, "j")),
            "queue 'gone' is not configured (see `baton queues`)");
}

TEST(DecayUsageTest, HalvesPerHalfLifeAndAddsWhatRan) {
  EXPECT_EQ(DecayUsage({1000, 100}, {0, 0}, absl::Hours(1), absl::Hours(1)), (Quantity{500, 50}));
  EXPECT_EQ(DecayUsage({0, 0}, {4, 1}, absl::Seconds(10), absl::Hours(1)), (Quantity{40, 10}));
  EXPECT_EQ(DecayUsage({1000, 0}, {2, 0}, absl::Hours(2), absl::Hours(1)),
            (Quantity{250 + 14400, 0}));
}

}  // namespace
}  // namespace baton::coordinator
