#include "common/assignment_failure.h"

#include <set>
#include <string>

#include "gtest/gtest.h"

namespace baton {
namespace {

// Every code has one name, and the name leads back to it.
TEST(AssignmentFailureTest, EveryCodeHasANameThatLeadsBack) {
  std::set<std::string> names;
  for (int i = baton::v1::AssignmentFailureCode_MIN + 1; i <= baton::v1::AssignmentFailureCode_MAX;
       ++i) {
    const auto code = static_cast<baton::v1::AssignmentFailureCode>(i);
    const std::string name(AssignmentFailureReason(code));
    EXPECT_FALSE(name.empty()) << baton::v1::AssignmentFailureCode_Name(code);
    EXPECT_TRUE(names.insert(name).second) << name;
    EXPECT_EQ(AssignmentFailureFromReason(name), code) << name;
  }
  EXPECT_EQ(AssignmentFailureReason(baton::v1::ASSIGNMENT_FAILURE_UNSPECIFIED), "");
  EXPECT_EQ(AssignmentFailureFromReason("SomethingNew"), baton::v1::ASSIGNMENT_FAILURE_UNSPECIFIED);
}

TEST(AssignmentFailureTest, TheCodeFirstThenTheReasonOfAnOlderWorker) {
  baton::v1::AssignmentFailed msg;
  msg.set_reason("DataNotFound");
  EXPECT_EQ(CodeOf(msg), baton::v1::ASSIGNMENT_FAILURE_DATA_NOT_FOUND);
  msg.set_code(baton::v1::ASSIGNMENT_FAILURE_LAUNCH_FAILED);
  EXPECT_EQ(CodeOf(msg), baton::v1::ASSIGNMENT_FAILURE_LAUNCH_FAILED);
}

}  // namespace
}  // namespace baton
