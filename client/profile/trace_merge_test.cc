#include "client/profile/trace_merge.h"

#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// As baton-trainer writes one rank's trace (worker/trainer/profile/trace.cc).
std::string RankTrace(int rank, const std::string& ts) {
  const std::string r = std::to_string(rank);
  return "{\"traceEvents\":[\n"
         "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":" +
         r + ",\"tid\":0,\"args\":{\"name\":\"rank " + r +
         " @ host\"}},\n"
         "{\"name\":\"forward\",\"cat\":\"step\",\"ph\":\"X\",\"ts\":" +
         ts + ",\"dur\":12,\"pid\":" + r +
         ",\"tid\":0,\"args\":{\"step\":5,\"note\":\"a, [b]}\"}}\n"
         "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"job_id\":\"j-1\",\"dropped_spans\":0,"
         "\"windows\":[{\"rank\":" +
         r + ",\"first_step\":5,\"steps\":2,\"partial\":false}]}}\n";
}

TEST(MergeChromeTracesTest, ConcatenatesEveryRanksEventsInRankOrderKeepingNumbersExact) {
  absl::StatusOr<std::string> merged = MergeChromeTraces(
      {{1, RankTrace(1, "1733100000000123")}, {0, RankTrace(0, "1733100000000001")}}, "j-1", 3);
  ASSERT_OK(merged.status());
  EXPECT_EQ(
      *merged,
      "{\"traceEvents\":[\n"
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":0,\"tid\":0,\"args\":{\"name\":\"rank "
      "0 @ host\"}},\n"
      "{\"name\":\"forward\",\"cat\":\"step\",\"ph\":\"X\",\"ts\":1733100000000001,\"dur\":12,"
      "\"pid\":0,\"tid\":0,\"args\":{\"step\":5,\"note\":\"a, [b]}\"}},\n"
      "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"name\":\"rank "
      "1 @ host\"}},\n"
      "{\"name\":\"forward\",\"cat\":\"step\",\"ph\":\"X\",\"ts\":1733100000000123,\"dur\":12,"
      "\"pid\":1,\"tid\":0,\"args\":{\"step\":5,\"note\":\"a, [b]}\"}}\n"
      "],\"displayTimeUnit\":\"ms\",\"otherData\":{\"job_id\":\"j-1\",\"generation\":3,"
      "\"ranks\":[0,1],\"windows\":[{\"rank\":0,\"first_step\":5,\"steps\":2,\"partial\":"
      "false},{\"rank\":1,\"first_step\":5,\"steps\":2,\"partial\":false}]}}\n");
}

TEST(MergeChromeTracesTest, NamesARankWhoseTraceNamesNoProcess) {
  absl::StatusOr<std::string> merged = MergeChromeTraces(
      {{2,
        "{\"traceEvents\":[{\"name\":\"x\",\"ph\":\"X\",\"ts\":1,\"dur\":1,\"pid\":2,"
        "\"tid\":0}]}"}},
      "j-\"q\"", 1);
  ASSERT_OK(merged.status());
  EXPECT_THAT(*merged, HasSubstr("{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"tid\":0,"
                                 "\"args\":{\"name\":\"rank 2\"}},\n{\"name\":\"x\""));
  EXPECT_THAT(*merged, HasSubstr("\"job_id\":\"j-\\\"q\\\"\""));
  EXPECT_THAT(*merged, HasSubstr("\"windows\":[]"));
}

TEST(MergeChromeTracesTest, EmptyEventListsMerge) {
  absl::StatusOr<std::string> merged =
      MergeChromeTraces({{0, "{\"traceEvents\":[]}"}, {1, " { \"traceEvents\" : [ ] } "}}, "j", 1);
  ASSERT_OK(merged.status());
  EXPECT_THAT(*merged, HasSubstr("\"ranks\":[0,1]"));
  EXPECT_THAT(*merged, Not(HasSubstr(",\n]")));
}

TEST(MergeChromeTracesTest, RejectsWhatIsNotATraceNamingTheRank) {
  EXPECT_THAT(MergeChromeTraces({{0, RankTrace(0, "1")}, {1, "{\"traceEvents\":[{]}"}}, "j", 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("the trace of rank 1 is not a Chrome trace")));
  EXPECT_THAT(MergeChromeTraces({{0, "{\"events\":[]}"}}, "j", 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("no \"traceEvents\" list")));
  EXPECT_THAT(MergeChromeTraces({{0, "[]"}}, "j", 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a JSON object")));
  EXPECT_THAT(MergeChromeTraces({{0, "{\"traceEvents\":[\"unterminated]}"}}, "j", 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("unterminated string")));
  EXPECT_THAT(MergeChromeTraces({{0, "{\"traceEvents\":[]} x"}}, "j", 1),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("trailing text")));
  EXPECT_THAT(
      MergeChromeTraces(
          {{0, "{\"traceEvents\":" + std::string(100, '[') + std::string(100, ']') + "}"}}, "j", 1),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("nested too deeply")));
}

}  // namespace
}  // namespace baton::cli
