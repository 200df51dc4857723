#include "worker/agent/lease.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/testing/metrics_testing.h"
#include "common/time/clock.h"
#include "common/time/testing/fake_clock.h"

namespace baton::worker {
namespace {

const absl::Time kT0 = absl::FromUnixSeconds(1000);

TEST(LeaseTest, NoLeaseUntilGrantedAndWhenNoneIsGranted) {
  Lease lease;
  EXPECT_TRUE(lease.Valid(kT0 + absl::Hours(1000)));
  lease.OnRegistered(kT0, absl::ZeroDuration());  // a coordinator without leases
  EXPECT_TRUE(lease.Valid(kT0 + absl::Hours(1000)));
  EXPECT_EQ(lease.expiry(), absl::InfiniteFuture());
}

TEST(LeaseTest, RegisteredGrantsFromTheRegistersSendTime) {
  Lease lease;
  lease.OnRegistered(kT0, absl::Seconds(10));
  EXPECT_TRUE(lease.Valid(kT0 + absl::Seconds(9)));
  EXPECT_FALSE(lease.Valid(kT0 + absl::Seconds(10)));
  EXPECT_EQ(lease.duration(), absl::Seconds(10));
}

TEST(LeaseTest, AckRenewsFromTheHeartbeatsSendTimeNotItsArrival) {
  Lease lease;
  lease.OnRegistered(kT0, absl::Seconds(10));
  const uint64_t a = lease.OnHeartbeatSent(kT0 + absl::Seconds(1));
  const uint64_t b = lease.OnHeartbeatSent(kT0 + absl::Seconds(2));
  EXPECT_LT(a, b);
  lease.OnAck(b);  // arrives late: still from its send time
  EXPECT_EQ(lease.expiry(), kT0 + absl::Seconds(12));
  lease.OnAck(a);  // older, and forgotten once b was acknowledged
  EXPECT_EQ(lease.expiry(), kT0 + absl::Seconds(12));
  EXPECT_FALSE(lease.Valid(kT0 + absl::Seconds(12)));
}

TEST(LeaseTest, UnacknowledgedHeartbeatsDoNotRenew) {
  Lease lease;
  lease.OnRegistered(kT0, absl::Seconds(10));
  for (int i = 1; i <= 20; ++i) lease.OnHeartbeatSent(kT0 + absl::Seconds(i));
  EXPECT_FALSE(lease.Valid(kT0 + absl::Seconds(10)));
  lease.OnAck(12345);  // never sent
  EXPECT_EQ(lease.expiry(), kT0 + absl::Seconds(10));
}

TEST(LeaseTest, ANewRegistrationReplacesTheLeaseAndForgetsTheOldStream) {
  Lease lease;
  lease.OnRegistered(kT0, absl::Seconds(10));
  const uint64_t old = lease.OnHeartbeatSent(kT0 + absl::Seconds(5));
  lease.OnRegistered(kT0 + absl::Seconds(20), absl::Seconds(4));
  lease.OnAck(old);
  EXPECT_EQ(lease.expiry(), kT0 + absl::Seconds(24));
}

TEST(LeaseTest, RemembersABoundedNumberOfHeartbeats) {
  Lease lease;
  lease.OnRegistered(kT0, absl::Seconds(10));
  const uint64_t first = lease.OnHeartbeatSent(kT0 + absl::Seconds(1));
  for (size_t i = 0; i < Lease::kMaxOutstanding; ++i) lease.OnHeartbeatSent(kT0 + absl::Seconds(2));
  lease.OnAck(first);  // forgotten
  EXPECT_EQ(lease.expiry(), kT0 + absl::Seconds(10));
}

TEST(LeaseMetricsTest, RemainingLeaseAndExpirations) {
  FakeClock clock;
  Lease lease;
  int64_t expirations = 0;
  LeaseMetrics metrics(&lease, [&] { return expirations; }, &clock);
  auto scrape = metrics.Collect();
  EXPECT_EQ(metrics_testing::Value(scrape, "baton_worker_lease_remaining_seconds", {}),
            std::nullopt);  // none held
  lease.OnRegistered(clock.Now(), absl::Seconds(10));
  clock.Advance(absl::Seconds(4));
  expirations = 2;
  scrape = metrics.Collect();
  EXPECT_THAT(metrics_testing::Value(scrape, "baton_worker_lease_remaining_seconds", {}),
              ::testing::Optional(6.0));
  EXPECT_THAT(metrics_testing::Value(scrape, "baton_worker_lease_expirations_total", {}),
              ::testing::Optional(2.0));
}

}  // namespace
}  // namespace baton::worker
