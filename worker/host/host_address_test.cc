#include "worker/host/host_address.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/status_matchers.h"

namespace baton::worker {
namespace {

using ::testing::HasSubstr;

TEST(RouteToTest, LoopbackTargetLeavesFromLoopback) {
  const absl::StatusOr<HostAddress> found = RouteTo("127.0.0.1:7070");
  ASSERT_OK(found);
  const HostAddress& a = *found;
  EXPECT_EQ(a.address, "127.0.0.1");
  EXPECT_EQ(a.interface, "lo");
}

TEST(RouteToTest, ResolvesNames) {
  const absl::StatusOr<HostAddress> found = RouteTo("localhost:7070");
  ASSERT_OK(found);
  const HostAddress& a = *found;
  EXPECT_EQ(a.interface, "lo");
}

TEST(RouteToTest, RejectsMalformedTargets) {
  for (const char* bad : {"", "7070", ":7070", "host", "host:", "host:0", "host:70000",
                          "[::1]7070", "[::1"}) {
    EXPECT_THAT(RouteTo(bad), StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_)) << bad;
  }
}

TEST(RouteToTest, UnresolvableNameIsUnavailable) {
  EXPECT_THAT(RouteTo("no-such-host.invalid:7070"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("no-such-host.invalid")));
}

TEST(AddressOfTest, Loopback) {
  const absl::StatusOr<HostAddress> found = AddressOf("lo");
  ASSERT_OK(found);
  const HostAddress& a = *found;
  EXPECT_EQ(a.address, "127.0.0.1");
  EXPECT_EQ(a.interface, "lo");
}

TEST(AddressOfTest, UnknownInterface) {
  EXPECT_THAT(AddressOf("nosuchif0"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no interface named nosuchif0")));
}

}  // namespace
}  // namespace baton::worker
