#include "worker/trainer/contract/profile_protocol.h"

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

TEST(ParseProfileRequestTest, AcceptsItsKeysAndNamesABadToken) {
  absl::StatusOr<ProfileRequest> r = ParseProfileRequest("id=p-1 steps=5 start_step=40\n", 20);
  ASSERT_OK(r);
  EXPECT_EQ(r->id, "p-1");
  EXPECT_EQ(r->steps, 5);
  EXPECT_EQ(r->start_step, 40);
  r = ParseProfileRequest("", 20);
  ASSERT_OK(r);
  EXPECT_EQ(r->id, "manual");
  EXPECT_EQ(r->steps, 20);
  EXPECT_EQ(r->start_step, 0);
  EXPECT_THAT(ParseProfileRequest("steps=0", 20),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'steps=0'")));
  EXPECT_THAT(ParseProfileRequest("id=../x", 20),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'id=../x'")));
  EXPECT_THAT(ParseProfileRequest("colour=red", 20),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("'colour=red'")));
}

// What the worker writes, the trainer reads back.
TEST(ProfileRequestTest, TheWorkersRequestParsesToItself) {
  ProfileRequest request;
  request.id = "p.7_a-b";
  request.steps = kMaxProfileSteps;
  request.start_step = 123;
  for (int64_t start_step : {int64_t{0}, int64_t{123}}) {
    request.start_step = start_step;
    absl::StatusOr<ProfileRequest> parsed = ParseProfileRequest(EncodeProfileRequest(request), 1);
    ASSERT_OK(parsed);
    EXPECT_EQ(parsed->id, request.id);
    EXPECT_EQ(parsed->steps, request.steps);
    EXPECT_EQ(parsed->start_step, request.start_step);
  }
  EXPECT_EQ(ProfileTraceFile("p1", 3), "trace-p1-rank3.json");
  EXPECT_EQ(ProfileErrorFile("p1", 3), "trace-p1-rank3.error");
  EXPECT_EQ(ProfileUnknownRequestErrorFile(3), "trace-unknown-rank3.error");
  EXPECT_FALSE(ValidProfileRequestId(std::string(65, 'a')));
  EXPECT_FALSE(ValidProfileRequestId("a/b"));
}

}  // namespace
}  // namespace baton::trainer
