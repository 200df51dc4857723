#include "coordinator/ha/leader_election.h"

#include <signal.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "coordinator/store/testing/etcd_member.h"
#include "coordinator/store/testing/etcd_suite.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::coordinator {
namespace {

using ::testing::HasSubstr;

// Real etcd, real time: what the daemon runs. Waits are for events, with deadlines.
constexpr absl::Duration kPatience = absl::Seconds(30);

ElectionOptions Timing() {
  ElectionOptions timing;
  timing.ttl = absl::Seconds(2);
  timing.renew_every = absl::Milliseconds(500);
  timing.safety = absl::Milliseconds(500);
  return timing;
}

std::shared_ptr<EtcdKv> Kv(const std::string& endpoint) {
  EtcdKv::Options options;
  options.call_timeout = Timing().renew_every;
  return std::make_shared<EtcdKv>(grpc::CreateChannel(endpoint, grpc::InsecureChannelCredentials()),
                                  endpoint, options);
}

LeaderElectionOptions Options(const std::string& key, const std::string& self) {
  LeaderElectionOptions options;
  options.key = key;
  options.self = self;
  options.timing = Timing();
  options.poll = absl::Milliseconds(20);
  return options;
}

class LeaderElectionTest : public EtcdSuite {};

TEST_F(LeaderElectionTest, OneLeadsTheOtherWaitsNamingItAndLeadsOnceItResigns) {
  LeaderElection a(Kv(member().endpoint()), Options("/one/leader", "a:7070"), RealClock::Get());
  LeaderElection b(Kv(member().endpoint()), Options("/one/leader", "b:7070"), RealClock::Get());
  const absl::StatusOr<EtcdFence> a_fence = a.Campaign();
  ASSERT_OK(a_fence);
  EXPECT_EQ(a.leader(), "a:7070");
  a.KeepLeading([](const absl::Status& s) { ADD_FAILURE() << "a lost leadership: " << s; });
  a.StopCampaign();  // a shutdown begins: A keeps renewing until it resigns

  absl::StatusOr<EtcdFence> b_fence;
  absl::Notification b_won;
  std::thread campaign([&] {
    b_fence = b.Campaign();
    b_won.Notify();
  });
  // B sees A as the leader, and stays a standby through several of A's renewals (which go
  // on after StopCampaign).
  const absl::Time until = absl::Now() + kPatience;
  while (b.leader() != "a:7070" && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  EXPECT_EQ(b.leader(), "a:7070");
  EXPECT_FALSE(b_won.WaitForNotificationWithTimeout(2 * Timing().ttl));

  ASSERT_OK(a.Resign());
  ASSERT_TRUE(b_won.WaitForNotificationWithTimeout(kPatience));
  campaign.join();
  ASSERT_OK(b_fence);
  EXPECT_GT(b_fence->create_revision, a_fence->create_revision);
  EXPECT_EQ(b.leader(), "b:7070");
  EXPECT_OK(b.Resign());
}

TEST_F(LeaderElectionTest, ALeaderWhoseLeaseIsGoneIsToldAtItsNextRenewal) {
  std::shared_ptr<EtcdKv> kv = Kv(member().endpoint());
  LeaderElection a(kv, Options("/gone/leader", "a:7070"), RealClock::Get());
  ASSERT_OK(a.Campaign());
  const absl::StatusOr<EtcdKeyValue> key = kv->Get("/gone/leader");
  ASSERT_OK(key);
  absl::Notification lost;
  std::string why;
  a.KeepLeading([&](const absl::Status& s) {
    why = std::string(s.message());
    lost.Notify();
  });
  ASSERT_OK(kv->RevokeLease(key->lease));  // what etcd does when the lease expires
  ASSERT_TRUE(lost.WaitForNotificationWithTimeout(kPatience));
  EXPECT_THAT(why, HasSubstr("has expired"));
}

TEST(LeaderElectionHungEtcdTest, ALeaderStepsDownWhenEtcdStopsAnsweringBeforeAStandbyCouldLead) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  absl::StatusOr<std::unique_ptr<EtcdMember>> etcd =
      EtcdMember::Start(absl::StrCat(tmp ? tmp : "/tmp", "/etcd-hung"));
  ASSERT_OK(etcd);
  LeaderElection a(Kv((*etcd)->endpoint()), Options("/hung/leader", "a:7070"), RealClock::Get());
  ASSERT_OK(a.Campaign());
  absl::Notification lost;
  std::string why;
  a.KeepLeading([&](const absl::Status& s) {
    why = std::string(s.message());
    lost.Notify();
  });
  // etcd hangs (it does not die: connections stay open, nothing answers). When the leader
  // must stop is coordinator/policy/election.h's LeadUntil, tested there on a table.
  ASSERT_EQ(::kill((*etcd)->pid(), SIGSTOP), 0);
  const bool stepped_down = lost.WaitForNotificationWithTimeout(kPatience);
  ::kill((*etcd)->pid(), SIGCONT);
  ASSERT_TRUE(stepped_down);
  EXPECT_THAT(why, HasSubstr("no lease renewal answered"));
}

}  // namespace
}  // namespace baton::coordinator
