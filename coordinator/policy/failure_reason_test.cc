#include "coordinator/policy/failure_reason.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

TEST(FailureReasonTest, EveryCodeHasADistinctNameThatReadsBack) {
  std::set<std::string> names;
  for (int i = baton::v1::FailureReason_MIN + 1; i <= baton::v1::FailureReason_MAX; ++i) {
    ASSERT_TRUE(baton::v1::FailureReason_IsValid(i)) << i;
    const auto code = static_cast<baton::v1::FailureReason>(i);
    const std::string name(FailureReasonName(code));
    EXPECT_NE(name, "Unspecified") << baton::v1::FailureReason_Name(code);
    EXPECT_TRUE(names.insert(name).second) << name;
    // A record written before reason_code existed is read by its name.
    baton::v1::Failure old;
    old.set_reason(name);
    EXPECT_EQ(FailureReasonOf(old), code) << name;
  }
}

TEST(FailureReasonTest, TheNamesAreThoseStoredBeforeTheEnum) {
  // The persisted names: records and events written by earlier versions carry them.
  EXPECT_EQ(FailureReasonName(baton::v1::FAILURE_REASON_RANK_FAILED), "RankFailed");
  EXPECT_EQ(FailureReasonName(baton::v1::FAILURE_REASON_WORKER_LOST), "WorkerLost");
  EXPECT_EQ(FailureReasonName(baton::v1::FAILURE_REASON_LEASE_EXPIRED), "LeaseExpired");
  EXPECT_EQ(FailureReasonName(baton::v1::FAILURE_REASON_WORKER_RESTARTED), "WorkerRestarted");
  EXPECT_EQ(FailureReasonName(baton::v1::FAILURE_REASON_STALLED), "Stalled");
  EXPECT_EQ(FailureReasonName(baton::v1::FAILURE_REASON_REATTACH_TIMEOUT), "ReattachTimeout");
  EXPECT_EQ(FailureReasonName(baton::v1::FAILURE_REASON_ASSIGNMENT_FAILED), "AssignmentFailed");
  EXPECT_EQ(FailureReasonName(baton::v1::FAILURE_REASON_DRAINING), "Draining");
  EXPECT_EQ(FailureReasonName(baton::v1::FAILURE_REASON_SCALING_UP), "ScalingUp");
  EXPECT_EQ(FailureReasonName(baton::v1::FAILURE_REASON_UNSPECIFIED), "Unspecified");
  EXPECT_EQ(FailureReasonName(static_cast<baton::v1::FailureReason>(99)), "Unspecified");
}

TEST(FailureReasonTest, TheCodeWinsOverTheName) {
  baton::v1::Failure f;
  f.set_reason_code(baton::v1::FAILURE_REASON_ASSIGNMENT_FAILED);
  f.set_reason("LeaseExpired");  // a worker's AssignmentFailed reason name
  EXPECT_EQ(FailureReasonOf(f), baton::v1::FAILURE_REASON_ASSIGNMENT_FAILED);
}

TEST(FailureReasonTest, OldRecordsOfAssignmentFailuresAndUnknownNames) {
  baton::v1::Failure f;
  f.set_reason("PortUnavailable");  // an AssignmentFailureCode's name
  EXPECT_EQ(FailureReasonOf(f), baton::v1::FAILURE_REASON_ASSIGNMENT_FAILED);
  f.set_reason("PeerUnreachable");
  EXPECT_EQ(FailureReasonOf(f), baton::v1::FAILURE_REASON_ASSIGNMENT_FAILED);
  f.set_reason("SomethingNew");
  EXPECT_EQ(FailureReasonOf(f), baton::v1::FAILURE_REASON_UNSPECIFIED);
  f.clear_reason();
  EXPECT_EQ(FailureReasonOf(f), baton::v1::FAILURE_REASON_UNSPECIFIED);
}

TEST(FailureReasonTest, OnlyAWorkersLossIsALoss) {
  for (int i = baton::v1::FailureReason_MIN; i <= baton::v1::FailureReason_MAX; ++i) {
    const auto code = static_cast<baton::v1::FailureReason>(i);
    EXPECT_EQ(IsWorkerLoss(code), code == baton::v1::FAILURE_REASON_WORKER_LOST ||
                                      code == baton::v1::FAILURE_REASON_LEASE_EXPIRED)
        << baton::v1::FailureReason_Name(code);
  }
}

}  // namespace
}  // namespace baton::coordinator
