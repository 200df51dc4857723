#include "common/net/coordinator_addresses.h"

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/health/health_check.h"
#include "common/net/testing/fake_replica.h"
#include "common/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ParseCoordinatorAddressesTest, AcceptsOneOrSeveralAddresses) {
  const std::map<std::string, std::vector<std::string>> cases = {
      {"head:7070", {"head:7070"}},
      {" 10.0.0.1:7070 , 10.0.0.2:7070,10.0.0.3:1 ",
       {"10.0.0.1:7070", "10.0.0.2:7070", "10.0.0.3:1"}},
      {"[::1]:7070,[fd00::2]:65535", {"[::1]:7070", "[fd00::2]:65535"}},
      {"dns:///head:7070", {"dns:///head:7070"}},
      {"unix:/run/baton.sock", {"unix:/run/baton.sock"}},
  };
  for (const auto& [list, want] : cases) {
    absl::StatusOr<std::vector<std::string>> got = ParseCoordinatorAddresses(list);
    ASSERT_OK(got.status()) << list;
    EXPECT_EQ(*got, want) << list;
  }
}

TEST(ParseCoordinatorAddressesTest, RejectsBadEntriesNamingThemAndWhatIsAllowed) {
  const std::map<std::string, std::string> cases = {
      {"", "no coordinator address given"},
      {"  ", "no coordinator address given"},
      {"a:1,,b:2", "'a:1,,b:2' has an empty entry"},
      {"a:1,", "has an empty entry"},
      {"a:1,head", "'head' has no port"},
      {"head:", "'head:' has no port"},
      {"[::1]", "'[::1]' has no port"},
      {":7070", "':7070' has no host"},
      {"head:0", "'head:0' has port '0', not one in 1..65535"},
      {"head:65536", "has port '65536'"},
      {"head:70x", "has port '70x'"},
      {"head:+1", "has port '+1'"},
      {"::1:7070", "without brackets (write [::1]:7070)"},
      {"[::1:7070", "has an unclosed '['"},
      {"a:1, b:2 ,a:1", "'a:1' is listed twice"},
      {"unix:", "'unix:' has no path"},
  };
  for (const auto& [list, want] : cases) {
    EXPECT_THAT(ParseCoordinatorAddresses(list),
                StatusIs(absl::StatusCode::kInvalidArgument,
                         AllOf(HasSubstr(want), HasSubstr("allowed: HOST:PORT, [IPV6]:PORT"))))
        << list;
  }
}

// A unary call of `method` to `address` (an empty message); the context is left finished.
grpc::Status CallOn(const std::string& address, const std::string& method,
                    grpc::ClientContext* context) {
  grpc::GenericStub stub(grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  grpc::Slice empty("");
  grpc::ByteBuffer request(&empty, 1), response;
  context->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(context, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
    status = std::move(s);
    done.Notify();
  });
  done.WaitForNotification();
  return status;
}

TEST(LeaderHintTest, AStandbyNamesTheLeaderInItsTrailingMetadata) {
  FakeReplica replica;
  replica.role().BecomeStandby("10.0.0.1:7070");
  grpc::ClientContext named;
  const grpc::Status status = CallOn(replica.address(), "/baton.v1.JobService/GetJob", &named);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(status.error_message(), "baton-coordinator " + replica.address() +
                                        " is a standby; the leader is 10.0.0.1:7070");
  EXPECT_EQ(LeaderHint(named), "10.0.0.1:7070");

  replica.role().BecomeStandby(std::nullopt);
  grpc::ClientContext unknown;
  EXPECT_THAT(
      CallOn(replica.address(), "/baton.v1.WorkerService/Connect", &unknown).error_message(),
      HasSubstr("is a standby; no leader is elected yet"));
  EXPECT_EQ(LeaderHint(unknown), std::nullopt);

  replica.role().BecomeLeader();
  grpc::ClientContext leader;
  EXPECT_EQ(CallOn(replica.address(), "/baton.v1.JobService/GetJob", &leader).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  EXPECT_EQ(LeaderHint(leader), std::nullopt);
}

constexpr char kCheck[] = "/grpc.health.v1.Health/Check";

// The address found, or the error as text (which then differs from any address).
std::string Found(const absl::StatusOr<std::string>& address) {
  return address.ok() ? *address : address.status().ToString();
}

// A finder over `replicas`' addresses that counts the channels it makes.
class FinderTest : public ::testing::Test {
 protected:
  LeaderFinder MakeFinder(const std::vector<std::string>& addresses,
                          absl::Duration probe_timeout = absl::Seconds(10)) {
    LeaderFinder::Options options;
    options.addresses = addresses;
    options.service = kJobServiceName;
    options.probe_timeout = probe_timeout;
    return LeaderFinder(options, [this](const std::string& address) {
      ++channels_made_[address];
      return grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
    });
  }

  FakeReplica a_, b_, c_;
  std::map<std::string, int> channels_made_;
};

TEST_F(FinderTest, FindsTheServingReplicaTryingThePreferredOneFirst) {
  a_.role().BecomeStandby(c_.address());
  b_.role().BecomeStandby(c_.address());
  LeaderFinder finder = MakeFinder({a_.address(), b_.address(), c_.address()});
  EXPECT_EQ(Found(finder.Find()), c_.address());  // In list order: a, b, then c.
  EXPECT_EQ(a_.role().calls(kCheck), 1);
  EXPECT_EQ(b_.role().calls(kCheck), 1);
  EXPECT_EQ(c_.role().calls(kCheck), 1);

  EXPECT_EQ(Found(finder.Find(c_.address())), c_.address());  // The last leader: one probe.
  EXPECT_EQ(a_.role().calls(kCheck), 1);
  EXPECT_EQ(c_.role().calls(kCheck), 2);

  // Leadership moves to b: preferring the old leader, the others follow in list order.
  c_.role().BecomeStandby(b_.address());
  b_.role().BecomeLeader();
  EXPECT_EQ(Found(finder.Find(c_.address())), b_.address());
  EXPECT_EQ(c_.role().calls(kCheck), 3);
  EXPECT_EQ(a_.role().calls(kCheck), 2);
  EXPECT_EQ(b_.role().calls(kCheck), 2);
  // A preferred address outside the list is ignored.
  EXPECT_EQ(Found(finder.Find("10.9.9.9:1")), b_.address());

  // One channel per address, however many probes.
  EXPECT_THAT(channels_made_,
              ElementsAre(::testing::Pair(::testing::_, 1), ::testing::Pair(::testing::_, 1),
                          ::testing::Pair(::testing::_, 1)));
  EXPECT_EQ(finder.ChannelTo(b_.address()), finder.ChannelTo(b_.address()));
  EXPECT_EQ(channels_made_[b_.address()], 1);
}

TEST_F(FinderTest, OneAddressIsReturnedWithoutAProbe) {
  a_.role().BecomeStandby(std::nullopt);
  LeaderFinder finder = MakeFinder({a_.address()});
  EXPECT_EQ(Found(finder.Find()), a_.address());
  EXPECT_EQ(Found(finder.Find("10.9.9.9:1")), a_.address());
  EXPECT_EQ(a_.role().calls(kCheck), 0);
  EXPECT_TRUE(channels_made_.empty());
}

TEST_F(FinderTest, AChannelThatFailedToConnectIsReplaced) {
  b_.Shutdown();  // Refuses connections.
  LeaderFinder finder = MakeFinder({a_.address(), b_.address()});
  EXPECT_EQ(Found(finder.Find(b_.address())), a_.address());
  EXPECT_EQ(Found(finder.Find(b_.address())), a_.address());
  EXPECT_EQ(channels_made_[a_.address()], 1);
  EXPECT_EQ(channels_made_[b_.address()], 2);
}

TEST_F(FinderTest, NoLeaderIsUnavailableListingEachAddressAndItsAnswer) {
  a_.role().BecomeStandby(std::nullopt);
  b_.Shutdown();  // Refuses connections.
  c_.role().set_hang_checks(true);
  LeaderFinder finder =
      MakeFinder({a_.address(), b_.address(), c_.address()}, absl::Milliseconds(300));
  EXPECT_THAT(finder.Find(),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("no coordinator leads (none of 3 addresses reports "
                                       "baton.v1.JobService SERVING): "),
                             HasSubstr(a_.address() + ": NOT_SERVING; "),
                             HasSubstr(b_.address() + ": unreachable ("),
                             HasSubstr(c_.address() + ": no answer within 300ms"))));
  // A standby answered: an election is under way.
  EXPECT_TRUE(ElectionUnderway(finder.Find().status()));
}

TEST_F(FinderTest, NoReplicaAnsweringIsNoElection) {
  b_.Shutdown();
  c_.Shutdown();
  LeaderFinder finder = MakeFinder({b_.address(), c_.address()}, absl::Milliseconds(300));
  const absl::StatusOr<std::string> found = finder.Find();
  EXPECT_TRUE(absl::IsUnavailable(found.status()));
  EXPECT_FALSE(ElectionUnderway(found.status()));
}

}  // namespace
}  // namespace baton
