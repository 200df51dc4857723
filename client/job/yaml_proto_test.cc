#include "client/job/yaml_proto.h"

#include <yaml-cpp/yaml.h>

#include <string>

#include "baton/v1/job.pb.h"
#include "baton/v1/job_service.pb.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

template <typename Message>
absl::Status Convert(const std::string& yaml, Message* out) {
  return YamlToMessage(YAML::Load(yaml), {"t.yaml", true}, out);
}

TEST(YamlToMessageTest, BoolsEnumsAndWellKnownTypes) {
  baton::v1::GetLogsRequest logs;
  ASSERT_OK(Convert("follow: true\nrank: -1\n", &logs));
  EXPECT_TRUE(logs.follow());
  EXPECT_EQ(logs.rank(), -1);
  EXPECT_THAT(Convert("follow: yes\n", &logs),
              StatusIs(kInvalid, "t.yaml:1:9: follow: expected true or false, got 'yes'"));

  baton::v1::LogLine line;
  ASSERT_OK(Convert("stream: STREAM_STDERR\ntime: 2024-05-01T12:00:00.5Z\n", &line));
  EXPECT_EQ(line.stream(), baton::v1::LogLine::STREAM_STDERR);
  EXPECT_EQ(line.time().seconds(), 1714564800);
  EXPECT_EQ(line.time().nanos(), 500000000);
  EXPECT_THAT(Convert("stream: LOUD\n", &line),
              StatusIs(kInvalid, HasSubstr("stream: expected one of Stream, got 'LOUD'; "
                                           "allowed: STREAM_UNSPECIFIED, STREAM_STDOUT, "
                                           "STREAM_STDERR")));

  baton::v1::JobResult result;
  ASSERT_OK(Convert("wall_time: 1m30.25s\nfinal_metrics: {loss: 0.5, accuracy: 1}\n", &result));
  EXPECT_EQ(result.wall_time().seconds(), 90);
  EXPECT_EQ(result.wall_time().nanos(), 250000000);
  EXPECT_THAT(result.final_metrics(),
              UnorderedElementsAre(Pair("loss", 0.5), Pair("accuracy", 1.0)));
  EXPECT_THAT(Convert("wall_time: soon\n", &result),
              StatusIs(kInvalid, HasSubstr("wall_time: expected a duration")));
  EXPECT_THAT(Convert("final_metrics: {loss: 1, loss: 2}\n", &result),
              StatusIs(kInvalid, HasSubstr("final_metrics.loss: is set twice")));
}

TEST(YamlToMessageTest, OneofOfMessagesAndNullMessage) {
  baton::v1::JobUpdate update;
  ASSERT_OK(Convert("seq: 3\nsnapshot:\n", &update));
  EXPECT_TRUE(update.has_snapshot());  // a null message value still selects the member
  EXPECT_THAT(Convert("snapshot: {}\nevent: {}\n", &update),
              StatusIs(kInvalid, HasSubstr("event: 'snapshot' is already set")));
}

TEST(YamlToMessageTest, NullElementsAreErrors) {
  baton::v1::CommandSpec command;
  EXPECT_THAT(Convert("argv: [a, ~]\n", &command),
              StatusIs(kInvalid, HasSubstr("argv[1]: expected a string, got nothing (null) "
                                           "(write '' for an empty string)")));
}

}  // namespace
}  // namespace baton::cli
