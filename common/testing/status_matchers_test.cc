#include "common/testing/status_matchers.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gtest/gtest-spi.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

// Counts its calls; EXPECT_FATAL_FAILURE's statement may only use statics.
int calls = 0;
absl::Status CountedStatus(absl::Status s) {
  ++calls;
  return s;
}
absl::StatusOr<int> CountedStatusOr(absl::StatusOr<int> s) {
  ++calls;
  return s;
}

class OkMacrosTest : public ::testing::Test {
 protected:
  void SetUp() override { calls = 0; }
};

TEST_F(OkMacrosTest, PassingEvaluatesTheExpressionOnce) {
  EXPECT_OK(CountedStatus(absl::OkStatus()));
  ASSERT_OK(CountedStatusOr(7));
  EXPECT_EQ(calls, 2);
}

TEST_F(OkMacrosTest, FailingEvaluatesTheExpressionOnceAndNamesItsStatus) {
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(CountedStatus(absl::NotFoundError("job j-1"))),
                          "NOT_FOUND: job j-1");
  EXPECT_EQ(calls, 1);
  EXPECT_FATAL_FAILURE(ASSERT_OK(CountedStatusOr(absl::AbortedError("stale"))),
                       "CountedStatusOr(absl::AbortedError(\"stale\"))");
  EXPECT_EQ(calls, 2);
}

TEST_F(OkMacrosTest, FurtherMessagesCanBeStreamed) {
  EXPECT_NONFATAL_FAILURE(EXPECT_OK(absl::InternalError("x")) << "while checking y",
                          "while checking y");
}

}  // namespace
}  // namespace baton
