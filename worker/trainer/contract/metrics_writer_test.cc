#include "worker/trainer/contract/metrics_writer.h"

#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <limits>
#include <string>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

using ::testing::HasSubstr;

TEST(MetricsWriterTest, FormatsOneJsonObjectPerLine) {
  EXPECT_EQ(FormatMetricsLine({{"step", 10}, {"epoch", 0}, {"loss", 0.25}, {"lr", 0.05}}),
            "{\"step\":10,\"epoch\":0,\"loss\":0.25,\"lr\":0.05}\n");
  EXPECT_EQ(FormatMetricsLine({{"samples_per_sec", 12345.678901234}}),
            "{\"samples_per_sec\":12345.6789}\n");
  EXPECT_EQ(FormatMetricsLine({{"step", 3e15}}), "{\"step\":3000000000000000}\n");
  EXPECT_EQ(FormatMetricsLine({{"big", 1e17}}), "{\"big\":1e+17}\n");
  EXPECT_EQ(FormatMetricsLine({}), "{}\n");
}

TEST(MetricsWriterTest, DropsNonFiniteValuesAndEscapesKeys) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  EXPECT_EQ(FormatMetricsLine({{"loss", nan}, {"step", 1}, {"rate", inf}}), "{\"step\":1}\n");
  EXPECT_EQ(FormatMetricsLine({{"a\"b\\c\n", 1}}), "{\"a\\\"b\\\\c\\n\":1}\n");
}

TEST(MetricsWriterTest, WritesWholeLinesToTheDescriptor) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  absl::StatusOr<MetricsWriter> writer = MetricsWriter::ForFd(fds[1]);
  ASSERT_OK(writer);
  EXPECT_TRUE(writer->enabled());
  ASSERT_OK(writer->Write({{"step", 1}, {"loss", 2.5}}));
  ASSERT_OK(writer->Write({{"step", 2}}));
  ::close(fds[1]);
  std::string got;
  char buf[256];
  ssize_t n;
  while ((n = ::read(fds[0], buf, sizeof(buf))) > 0) got.append(buf, n);
  ::close(fds[0]);
  EXPECT_EQ(got, "{\"step\":1,\"loss\":2.5}\n{\"step\":2}\n");
}

TEST(MetricsWriterTest, DisabledWriterAndBadDescriptors) {
  MetricsWriter disabled;
  EXPECT_FALSE(disabled.enabled());
  EXPECT_OK(disabled.Write({{"step", 1}}));
  EXPECT_THAT(MetricsWriter::ForFd(987),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fd 987")));
  // A reader that went away surfaces as UNAVAILABLE (SIGPIPE ignored, as trainer_main does).
  ::signal(SIGPIPE, SIG_IGN);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  MetricsWriter broken(fds[1]);
  EXPECT_THAT(broken.Write({{"step", 1}}),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("Broken pipe")));
  ::close(fds[1]);
}

}  // namespace
}  // namespace baton::trainer
