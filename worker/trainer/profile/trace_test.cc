#include "worker/trainer/profile/trace.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

TraceSpan Span(const std::string& name, int64_t start_us, int64_t dur_us, int thread = 0) {
  TraceSpan span;
  span.name = name;
  span.category = "step";
  span.start = absl::FromUnixMicros(start_us);
  span.duration = absl::Microseconds(dur_us);
  span.thread = thread;
  return span;
}

TEST(TraceRecorderTest, KeepsAtMostMaxSpansAndCountsTheRest) {
  TraceRecorder recorder(2);
  recorder.Record(Span("a", 1, 1));
  recorder.Record(Span("b", 2, 1));
  recorder.Record(Span("c", 3, 1));
  ASSERT_EQ(recorder.Spans().size(), 2u);
  EXPECT_EQ(recorder.Spans()[1].name, "b");
  EXPECT_EQ(recorder.dropped(), 1);
  recorder.Clear();
  EXPECT_TRUE(recorder.Spans().empty());
  EXPECT_EQ(recorder.dropped(), 0);
}

TEST(JsonStringTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonString("a\"b\\c"), R"("a\"b\\c")");
  EXPECT_EQ(JsonString(std::string("\n\t\x01", 3)), R"("\u000a\u0009\u0001")");
  EXPECT_EQ(JsonString("bucket \xc3\xa9"), "\"bucket \xc3\xa9\"");  // UTF-8 kept
}

TEST(JsonStringTest, ReplacesBytesThatAreNotUtf8) {
  EXPECT_EQ(JsonString("x\xff"), "\"x\xef\xbf\xbd\"");
  EXPECT_EQ(JsonString("\xc3"), "\"\xef\xbf\xbd\"");  // truncated sequence
  EXPECT_EQ(JsonString("\xed\xa0\x80"), "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\"");  // surrogate
  EXPECT_EQ(JsonString("\xc0\xaf"), "\"\xef\xbf\xbd\xef\xbf\xbd\"");                  // overlong
}

TEST(ChromeTraceJsonTest, CompleteEventsInMicrosecondsWithMetadataPerRankAndThread) {
  TraceSpan reduce = Span("allreduce bucket 0", 1'700'000'000'000'100, 250, 1);
  reduce.category = "comm";
  reduce.int_args["bytes"] = 4096;
  reduce.string_args["backend"] = "gloo";
  TraceProcess rank0{0, "j-000001", "host-a", 0};
  TraceProcess rank1{1, "j-000001", "host-b", 3};
  const std::string json =
      ChromeTraceJson({{rank0, {Span("forward", 1'700'000'000'000'000, 90), reduce}}, {rank1, {}}});
  EXPECT_THAT(json, HasSubstr(R"({"name":"forward","cat":"step","ph":"X","ts":1700000000000000,)"
                              R"("dur":90,"pid":0,"tid":0,"args":{}})"));
  EXPECT_THAT(json, HasSubstr(R"("ph":"X","ts":1700000000000100,"dur":250,"pid":0,"tid":1,)"
                              R"("args":{"bytes":4096,"backend":"gloo"}})"));
  EXPECT_THAT(json, HasSubstr(R"({"name":"process_name","ph":"M","pid":1,"tid":0,)"
                              R"("args":{"name":"rank 1 @ host-b"}})"));
  EXPECT_THAT(json, HasSubstr(R"("tid":1,"args":{"name":"collectives"}})"));
  // Rank 1 recorded nothing: no thread metadata for it.
  EXPECT_THAT(json, Not(HasSubstr(R"("pid":1,"tid":0,"args":{"name":"training"})")));
  EXPECT_THAT(json, HasSubstr(R"("otherData":{"job_id":"j-000001","dropped_spans":3,"windows":[)"
                              R"({"rank":0,"first_step":0,"steps":0,"partial":false},)"
                              R"({"rank":1,"first_step":0,"steps":0,"partial":false}]})"));
}

TEST(ChromeTraceJsonTest, ANegativeDurationIsWrittenAsZero) {
  const std::string json = ChromeTraceJson({{TraceProcess{}, {Span("clock went back", 1000, -5)}}});
  EXPECT_THAT(json, HasSubstr(R"("ts":1000,"dur":0,)"));
}

}  // namespace
}  // namespace baton::trainer
