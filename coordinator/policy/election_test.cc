#include "coordinator/policy/election.h"

#include <string>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

const absl::Duration kWorkerLease = absl::Seconds(10);

TEST(ElectionTest, TheDefaultsFailOverWellInsideTheWorkerLease) {
  EXPECT_TRUE(ValidateElectionOptions(ElectionOptions(), kWorkerLease).ok());
}

TEST(ElectionTest, OptionsOutsideTheirRangesAreRefusedNamingTheOption) {
  struct Case {
    ElectionOptions options;
    const char* error;  // "" for OK
  };
  const absl::Duration s = absl::Seconds(1), ms = absl::Milliseconds(1);
  const Case cases[] = {
      {{2 * s, 500 * ms, 500 * ms}, ""},
      {{1999 * ms, 500 * ms, 0 * ms}, "election ttl: 1.999s is too short"},
      {{10 * s, 1 * s, 1 * s}, "must be below the worker lease (10s)"},
      {{9 * s, 3 * s, 1 * s}, ""},
      {{9 * s, 3001 * ms, 1 * s}, "election renew_every: 3.001s is outside (0, ttl / 3 = 3s]"},
      {{3 * s, 0 * ms, 0 * ms}, "election renew_every: 0 is outside"},
      {{3 * s, 500 * ms, -1 * ms}, "election safety: -1ms is outside [0, ttl - renew_every"},
      {{3 * s, 500 * ms, 2500 * ms},
       "election safety: 2.5s is outside [0, ttl - renew_every = "
       "2.5s)"},
      {{3 * s, 500 * ms, 2499 * ms}, ""},
  };
  for (const Case& c : cases) {
    const absl::Status status = ValidateElectionOptions(c.options, kWorkerLease);
    if (std::string(c.error).empty()) {
      EXPECT_TRUE(status.ok()) << status;
    } else {
      EXPECT_TRUE(absl::IsInvalidArgument(status)) << c.error;
      EXPECT_THAT(std::string(status.message()), HasSubstr(c.error));
    }
  }
}

TEST(ElectionTest, ALeaderStopsActingBeforeEtcdCouldHaveExpiredItsLease) {
  ElectionOptions o;
  o.ttl = absl::Seconds(3);
  o.safety = absl::Milliseconds(500);
  const absl::Time sent = absl::FromUnixSeconds(100);
  EXPECT_EQ(LeadUntil(sent, o), sent + absl::Milliseconds(2500));
  EXPECT_FALSE(MustStepDown(sent, sent, o));
  EXPECT_FALSE(MustStepDown(sent, sent + absl::Milliseconds(2499), o));
  EXPECT_TRUE(MustStepDown(sent, sent + absl::Milliseconds(2500), o));
  EXPECT_EQ(LeadUntil(sent, ElectionOptions()), sent + absl::Milliseconds(1500));  // 2 s ttl
  // etcd's view: the renewal arrived no earlier than it was sent, so its lease holds until
  // at least sent + ttl, later than the leader stops.
  EXPECT_LT(LeadUntil(sent, o), sent + o.ttl);
}

}  // namespace
}  // namespace baton::coordinator
