#include "worker/peer_probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "common/status_matchers.h"
#include "worker/reserve_port.h"

namespace baton::worker {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

baton::v1::Peer Peer(const std::string& id, const std::string& host, int port) {
  baton::v1::Peer p;
  p.set_worker_id(id);
  p.set_host(host);
  p.set_probe_port(port);
  return p;
}

TEST(PeerProbeTest, ReachablePeersPass) {
  absl::StatusOr<std::unique_ptr<ProbeListener>> a = ProbeListener::Start(0);
  absl::StatusOr<std::unique_ptr<ProbeListener>> b = ProbeListener::Start(0);
  ASSERT_OK(a);
  ASSERT_OK(b);
  EXPECT_GT((*a)->port(), 0);
  EXPECT_OK(ProbePeers({Peer("w1", "127.0.0.1", (*a)->port()),
                        Peer("w2", "localhost", (*b)->port()),
                        Peer("w3", "::1", (*b)->port())},
                       absl::Seconds(5)));
  // Again: the listener keeps accepting.
  EXPECT_OK(ProbePeers({Peer("w1", "127.0.0.1", (*a)->port())}, absl::Seconds(5)));
}

TEST(PeerProbeTest, UnreachablePeersAreNamedWithTheirAddress) {
  absl::StatusOr<std::unique_ptr<ProbeListener>> a = ProbeListener::Start(0);
  ASSERT_OK(a);
  absl::StatusOr<int> closed = ReserveTcpPort();  // nothing listens there
  ASSERT_OK(closed);
  EXPECT_THAT(ProbePeers({Peer("w1", "127.0.0.1", (*a)->port()),
                          Peer("w2", "127.0.0.1", *closed),
                          Peer("w3", "no-such-host.invalid", 1)},
                         absl::Seconds(5)),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("worker w2 at 127.0.0.1:"), HasSubstr("refused"),
                             HasSubstr("worker w3 at no-such-host.invalid:1: cannot resolve"),
                             ::testing::Not(HasSubstr("worker w1")))));
}

TEST(PeerProbeTest, PeersWithoutAProbePortAreSkipped) {
  EXPECT_OK(ProbePeers({Peer("w1", "203.0.113.1", 0)}, absl::Seconds(1)));
  EXPECT_OK(ProbePeers({}, absl::Seconds(1)));
}

TEST(PeerProbeTest, ListenerStopsOnDestruction) {
  int port = 0;
  {
    absl::StatusOr<std::unique_ptr<ProbeListener>> a = ProbeListener::Start(0);
    ASSERT_OK(a);
    port = (*a)->port();
  }
  EXPECT_THAT(ProbePeers({Peer("w1", "127.0.0.1", port)}, absl::Seconds(5)),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("refused")));
}

}  // namespace
}  // namespace baton::worker
