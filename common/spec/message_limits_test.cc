#include "common/spec/message_limits.h"

#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

using ::testing::HasSubstr;

TEST(WorkerMessageLimitsTest, BoundsReportsFromAPeer) {
  baton::v1::WorkerMessage msg;
  baton::v1::MetricsReport* m = msg.mutable_metrics();
  for (int i = 0; i < kMaxReportEntries; ++i) (*m->add_points()->mutable_values())["loss"] = i;
  EXPECT_OK(CheckMessageLimits(msg));
  m->add_points();
  EXPECT_THAT(CheckMessageLimits(msg),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("metrics.points: 1001")));

  m->Clear();
  baton::v1::MetricPoint* p = m->add_points();
  for (int i = 0; i <= kMaxPointValues; ++i) (*p->mutable_values())[std::to_string(i)] = i;
  EXPECT_THAT(CheckMessageLimits(msg),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("at most 64 values")));
  p->Clear();
  (*p->mutable_values())[std::string(kMaxMetricNameBytes + 1, 'x')] = 1;
  EXPECT_THAT(CheckMessageLimits(msg), StatusIs(absl::StatusCode::kInvalidArgument,
                                                HasSubstr("name: 129 bytes")));

  baton::v1::WorkerMessage logs;
  for (int i = 0; i <= kMaxReportEntries; ++i) logs.mutable_logs()->add_lines();
  EXPECT_THAT(CheckMessageLimits(logs),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("logs.lines")));
}

}  // namespace
}  // namespace baton
