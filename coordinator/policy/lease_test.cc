#include "coordinator/policy/lease.h"

#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

const absl::Time kT = absl::FromUnixSeconds(1000);
const LeaseOptions kOptions{absl::Seconds(10), absl::Seconds(1)};

TEST(LeaseTest, ALeaseCertainlyExpiresLeasePlusMarginAfterItsRenewal) {
  EXPECT_EQ(LeaseCertainlyExpired(kT, kOptions), kT + absl::Seconds(11));
  EXPECT_EQ(LeaseCertainlyExpired(kT, LeaseOptions()), kT + absl::Seconds(11));  // defaults
}

TEST(LeaseTest, ASilentWorkerIsLostOnlyStrictlyAfterThat) {
  struct Case {
    absl::Duration silent;
    bool lost;
  };
  for (const Case& c :
       {Case{absl::ZeroDuration(), false}, Case{absl::Seconds(10), false},
        Case{absl::Seconds(11), false}, Case{absl::Seconds(11) + absl::Nanoseconds(1), true},
        Case{absl::Hours(1), true}}) {
    EXPECT_EQ(LeaseExpiredAt(kT, kT + c.silent, kOptions), c.lost) << c.silent;
  }
}

TEST(LeaseTest, WhenAWorkersProcessesAreCertainlyDead) {
  const absl::Time start = kT - absl::Seconds(100);
  struct Case {
    const char* what;
    LeaseFacts facts;
    absl::Time want;
  };
  const Case cases[] = {
      {"connected: they report their own exits",
       {/*known=*/true, /*connected=*/true, /*leased=*/true, kT},
       absl::InfiniteFuture()},
      {"connected without a lease", {true, true, false, kT}, absl::InfiniteFuture()},
      {"lost, leased: once the lease certainly expired",
       {true, false, true, kT},
       kT + absl::Seconds(11)},
      {"lost, no lease (protocol < 3): at once", {true, false, false, kT}, absl::InfinitePast()},
      {"unknown: a lease a previous coordinator granted",
       {false, false, false, kT},
       start + absl::Seconds(11)},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(ProcessesDeadAfter(c.facts, start, kOptions), c.want) << c.what;
  }
}

}  // namespace
}  // namespace baton::coordinator
