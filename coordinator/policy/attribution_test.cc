#include "coordinator/policy/attribution.h"

#include <string>

#include "common/time/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

const absl::Time kT = absl::FromUnixSeconds(1000);

// Generation 3 on w1 (ranks 0, 1) and w2 (rank 2), RESTARTING after a user failure at kT
// (rank 1's exit, reported first), which used one user restart.
baton::v1::Job FailedJob() {
  baton::v1::Job job;
  job.set_generation(3);
  for (int r = 0; r < 3; ++r) {
    baton::v1::RankInfo* rank = job.add_ranks();
    rank->set_rank(r);
    rank->set_worker_id(r < 2 ? "w1" : "w2");
  }
  job.mutable_restarts()->set_user(1);
  baton::v1::Failure* f = job.mutable_restarts()->add_failures();
  f->set_generation(3);
  f->set_next_generation(4);
  f->set_failure_class(baton::v1::FAILURE_CLASS_USER);
  f->set_reason("ProcessFailed");
  f->set_cause("rank 1 exited with code 1");
  f->set_rank(1);
  f->set_worker_id("w1");
  *f->mutable_occurred_time() = ToProto(kT);
  return job;
}

baton::v1::ProcessExit Exit(int code, absl::Time at) {
  baton::v1::ProcessExit exit;
  exit.set_exit_code(code);
  *exit.mutable_time() = ToProto(at);
  return exit;
}

TEST(AttributionTest, AnEarlierFailedExitTakesTheBlame) {
  const baton::v1::Job job = FailedJob();
  EXPECT_TRUE(ExitPrecedesRecordedFailure(job, Exit(1, kT - absl::Seconds(1))));
  EXPECT_FALSE(ExitPrecedesRecordedFailure(job, Exit(1, kT)));                     // not earlier
  EXPECT_FALSE(ExitPrecedesRecordedFailure(job, Exit(0, kT - absl::Seconds(1))));  // succeeded
  baton::v1::ProcessExit untimed = Exit(1, kT);
  untimed.clear_time();
  EXPECT_FALSE(ExitPrecedesRecordedFailure(job, untimed));
  baton::v1::Job older = job;
  older.set_generation(4);  // The record is of an older generation.
  EXPECT_FALSE(ExitPrecedesRecordedFailure(older, Exit(1, kT - absl::Seconds(1))));
  baton::v1::Job infra = job;
  infra.mutable_restarts()->mutable_failures(0)->set_failure_class(baton::v1::FAILURE_CLASS_INFRA);
  EXPECT_FALSE(ExitPrecedesRecordedFailure(infra, Exit(1, kT - absl::Seconds(1))));

  baton::v1::Job changed = job;
  const std::string message = ReattributeToExit(&changed, 2, "w2", Exit(3, kT - absl::Seconds(1)),
                                                "rank 2 exited with code 3");
  EXPECT_THAT(message, HasSubstr("failed first at rank 2 exited with code 3"));
  EXPECT_THAT(message, HasSubstr("reported after: rank 1 exited with code 1"));
  const baton::v1::Failure& f = changed.restarts().failures(0);
  EXPECT_EQ(f.rank(), 2);
  EXPECT_EQ(f.worker_id(), "w2");
  EXPECT_EQ(f.cause(), "rank 2 exited with code 3");
  EXPECT_EQ(FromProto(f.occurred_time()), kT - absl::Seconds(1));
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_USER);
}

TEST(AttributionTest, AnEarlierLossOfAWorkerOfTheGenerationMakesItInfra) {
  baton::v1::Job job = FailedJob();
  const std::string message = ReattributeToWorkerLoss(
      &job, "w2", baton::v1::FAILURE_REASON_LEASE_EXPIRED, "worker w2 lost", kT - absl::Seconds(2));
  EXPECT_THAT(message, HasSubstr("its peers' exits followed: rank 1 exited with code 1"));
  const baton::v1::Failure& f = job.restarts().failures(0);
  EXPECT_EQ(f.failure_class(), baton::v1::FAILURE_CLASS_INFRA);
  EXPECT_EQ(f.reason(), "LeaseExpired");
  EXPECT_FALSE(f.has_rank());
  EXPECT_EQ(f.worker_id(), "w2");
  EXPECT_EQ(job.restarts().user(), 0);  // The restart moves from the user's budget.
  EXPECT_EQ(job.restarts().infra(), 1);
}

TEST(AttributionTest, ALossThatCameLaterOrElsewhereChangesNothing) {
  const baton::v1::Job job = FailedJob();
  for (const auto& [worker, at] :
       {std::pair<std::string, absl::Time>{"w2", kT}, {"w3", kT - absl::Seconds(2)}}) {
    baton::v1::Job copy = job;
    EXPECT_EQ(
        ReattributeToWorkerLoss(&copy, worker, baton::v1::FAILURE_REASON_WORKER_LOST, "lost", at),
        "")
        << worker;
    EXPECT_EQ(copy.SerializeAsString(), job.SerializeAsString()) << worker;
  }
  // A failure that ended the job (no next generation) keeps its budget counts.
  baton::v1::Job ended = job;
  ended.mutable_restarts()->mutable_failures(0)->set_next_generation(0);
  EXPECT_NE(ReattributeToWorkerLoss(&ended, "w1", baton::v1::FAILURE_REASON_WORKER_LOST, "lost",
                                    kT - absl::Seconds(1)),
            "");
  EXPECT_EQ(ended.restarts().user(), 1);
  EXPECT_EQ(ended.restarts().infra(), 0);
}

}  // namespace
}  // namespace baton::coordinator
