#include <sched.h>

#include "absl/status/statusor.h"
#include "common/cpus.h"
#include "common/grpc_status.h"
#include "common/status_macros.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

using ::testing::HasSubstr;

TEST(UsableCpusTest, CountsTheAffinityMask) {
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof(set), &set), 0);
  EXPECT_EQ(UsableCpus(), CPU_COUNT(&set));
  EXPECT_GE(UsableCpus(), 1);
}

absl::StatusOr<int> Half(int x) {
  if (x % 2 != 0) return absl::InvalidArgumentError("odd");
  return x / 2;
}

absl::StatusOr<int> Quarter(int x) {
  ASSIGN_OR_RETURN(int h, Half(x));
  ASSIGN_OR_RETURN(int q, Half(h));
  return q;
}

absl::Status CheckEven(int x) {
  RETURN_IF_ERROR(Half(x).status());
  return absl::OkStatus();
}

TEST(StatusMacros, PropagateErrorsAndValues) {
  EXPECT_EQ(*Quarter(8), 2);
  EXPECT_THAT(Quarter(6), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("odd")));
  EXPECT_OK(CheckEven(4));
  EXPECT_FALSE(CheckEven(3).ok());
}

TEST(FakeClock, MovesOnlyWhenAdvanced) {
  FakeClock clock;
  const absl::Time t0 = clock.Now();
  EXPECT_EQ(clock.Now(), t0);
  clock.Advance(absl::Seconds(5));
  EXPECT_EQ(clock.Now() - t0, absl::Seconds(5));
}

TEST(GrpcStatus, RoundTripKeepsCodeAndMessage) {
  const absl::Status s = absl::NotFoundError("job j-1 not found");
  const grpc::Status g = ToGrpcStatus(s);
  EXPECT_EQ(g.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(FromGrpcStatus(g), s);
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
}

TEST(ProtoTime, RoundTrip) {
  const absl::Time t = absl::FromUnixNanos(1700000000123456789);
  EXPECT_EQ(FromProto(ToProto(t)), t);
  const absl::Duration d = absl::Milliseconds(2500);
  EXPECT_EQ(ToProto(d).seconds(), 2);
  EXPECT_EQ(ToProto(d).nanos(), 500000000);
  EXPECT_EQ(FromProto(ToProto(d)), d);
}

}  // namespace
}  // namespace baton
