#include "worker/trainer/contract/metrics_line.h"

#include <cmath>
#include <limits>

#include "common/testing/status_matchers.h"
#include "common/time/proto_time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/trainer/contract/metrics_writer.h"

namespace baton::worker {
namespace {

using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

TEST(ParseMetricsLineTest, StepAndNumericValues) {
  absl::StatusOr<baton::v1::MetricPoint> p = ParseMetricsLine(
      R"({"step":10,"epoch":0,"loss":0.71,"accuracy":0.8,"samples_per_sec":1234.5,"lr":0.05})");
  ASSERT_OK(p);
  EXPECT_EQ(p->step(), 10);
  EXPECT_THAT(p->values(),
              UnorderedElementsAre(Pair("epoch", 0.0), Pair("loss", 0.71), Pair("accuracy", 0.8),
                                   Pair("samples_per_sec", 1234.5), Pair("lr", 0.05)));
  EXPECT_FALSE(p->has_time());
}

// Both sides of the contract: what the trainer's writer formats, the worker's parser reads
// back (a non-finite value is left out by the writer, so the line stays JSON).
TEST(ParseMetricsLineTest, ReadsWhatTheWriterFormats) {
  const std::string line = trainer::FormatMetricsLine(
      {{"step", 123456789012}, {"loss", 0.123456789}, {"lr", 3e-4},
       {"grad_norm", std::numeric_limits<double>::quiet_NaN()}, {"samples_per_sec", 1e6}});
  ASSERT_FALSE(line.empty());
  EXPECT_EQ(line.back(), '\n');
  absl::StatusOr<baton::v1::MetricPoint> p = ParseMetricsLine(line);
  ASSERT_OK(p);
  EXPECT_EQ(p->step(), 123456789012);
  EXPECT_THAT(p->values(), UnorderedElementsAre(Pair("loss", 0.123456789), Pair("lr", 3e-4),
                                                Pair("samples_per_sec", 1e6)));
}

TEST(ParseMetricsLineTest, NonNumericValuesAreSkippedAndStepDefaultsToZero) {
  absl::StatusOr<baton::v1::MetricPoint> p =
      ParseMetricsLine(R"({"loss":1.5,"phase":"train","ok":true,"nested":{"a":1},"n":null})");
  ASSERT_OK(p);
  EXPECT_EQ(p->step(), 0);
  EXPECT_THAT(p->values(), UnorderedElementsAre(Pair("loss", 1.5)));
}

TEST(ParseMetricsLineTest, LargeStep) {
  absl::StatusOr<baton::v1::MetricPoint> p = ParseMetricsLine(R"({"step":4000000000})");
  ASSERT_OK(p);
  EXPECT_EQ(p->step(), 4000000000LL);
}

TEST(ParseMetricsLineTest, MalformedLines) {
  for (const char* line : {"", "not json", "{\"loss\":", "[1,2]", "42", "{\"loss\":0.5}}"}) {
    EXPECT_THAT(ParseMetricsLine(line),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("JSON object")))
        << line;
  }
}

TEST(ParseMetricsLineTest, BadStep) {
  for (const char* line : {R"({"step":-1})", R"({"step":1.5})", R"({"step":"10"})"}) {
    EXPECT_THAT(ParseMetricsLine(line),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("step")))
        << line;
  }
}

TEST(HeartbeatFromPointTest, ALineTheTrainerWrote) {
  // The line as baton-trainer's heartbeat formats it (progress/heartbeat.h).
  absl::StatusOr<baton::v1::MetricPoint> p = ParseMetricsLine(
      R"({"beat":7,"step":4,"phase":3,"phase_s":0.5,"coll":12,"waiting":1,"wait_s":0.25,)"
      R"("ref_step_s":0.01,"ref_checkpoint_s":2})");
  ASSERT_OK(p);
  p->set_generation(3);
  p->set_rank(1);
  const std::optional<baton::v1::RankBeat> beat = HeartbeatFromPoint(*p);
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ(beat->generation(), 3);
  EXPECT_EQ(beat->rank(), 1);
  EXPECT_EQ(beat->seq(), 7);
  EXPECT_EQ(beat->step(), 4);
  EXPECT_EQ(beat->phase(), "checkpoint");
  EXPECT_EQ(FromProto(beat->in_phase()), absl::Milliseconds(500));
  EXPECT_EQ(beat->collectives(), 12);
  EXPECT_TRUE(beat->waiting());
  EXPECT_EQ(FromProto(beat->waited()), absl::Milliseconds(250));
  EXPECT_EQ(beat->references_size(), 2);
  EXPECT_EQ(FromProto(beat->references().at("step")), absl::Milliseconds(10));
  EXPECT_EQ(FromProto(beat->references().at("checkpoint")), absl::Seconds(2));
}

TEST(HeartbeatFromPointTest, MetricLinesAreNotHeartbeatsAndOddValuesAreTamed) {
  absl::StatusOr<baton::v1::MetricPoint> metric = ParseMetricsLine(R"({"step":4,"loss":1})");
  ASSERT_OK(metric);
  EXPECT_FALSE(HeartbeatFromPoint(*metric).has_value());
  absl::StatusOr<baton::v1::MetricPoint> odd =
      ParseMetricsLine(R"({"beat":1,"phase":99,"phase_s":-5,"coll":-1,"ref_step_s":-1})");
  ASSERT_OK(odd);
  const std::optional<baton::v1::RankBeat> beat = HeartbeatFromPoint(*odd);
  ASSERT_TRUE(beat.has_value());
  EXPECT_EQ(beat->phase(), "unknown");
  EXPECT_EQ(FromProto(beat->in_phase()), absl::ZeroDuration());
  EXPECT_EQ(beat->collectives(), 0);
  EXPECT_FALSE(beat->waiting());
  EXPECT_TRUE(beat->references().empty());
}

}  // namespace
}  // namespace baton::worker
