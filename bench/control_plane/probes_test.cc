#include "bench/control_plane/probes.h"

#include <unistd.h>

#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::bench {
namespace {

using ::testing::HasSubstr;

TEST(ProbesTest, SampleOfNoProcessIsZero) {
  const ProcSample s = SampleProc(0);
  EXPECT_EQ(s.cpu_s, 0);
  EXPECT_EQ(s.rss_mib, 0);
}

TEST(ProbesTest, SampleOfThisProcess) {
  const ProcSample s = SampleProc(getpid());
  EXPECT_GT(s.rss_mib, 0);
  EXPECT_GE(s.cpu_s, 0);
  EXPECT_GT(SelfCpuSeconds(), 0);
}

TEST(ProbesTest, ScrapeNeedsAnIpv4AddressAndPort) {
  EXPECT_THAT(ScrapeCommits("localhost"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("want HOST:PORT")));
  EXPECT_THAT(ScrapeCommits("127.0.0.1:0"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("bad port")));
  EXPECT_THAT(ScrapeCommits("localhost:9090"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an IPv4 address")));
  EXPECT_THAT(ScrapeEtcd("localhost:2379"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not an IPv4 address")));
}

}  // namespace
}  // namespace baton::bench
