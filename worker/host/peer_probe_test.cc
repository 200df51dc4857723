#include "worker/host/peer_probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/testing/fake_clock.h"
#include "worker/host/reserve_port.h"
#include "worker/testing/black_hole.h"

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
                       absl::Seconds(5), RealClock::Get()));
  // Again: the listener keeps accepting.
  EXPECT_OK(
      ProbePeers({Peer("w1", "127.0.0.1", (*a)->port())}, absl::Seconds(5), RealClock::Get()));
}

TEST(PeerProbeTest, UnreachablePeersAreNamedWithTheirAddress) {
  absl::StatusOr<std::unique_ptr<ProbeListener>> a = ProbeListener::Start(0);
  ASSERT_OK(a);
  absl::StatusOr<int> closed = ReserveTcpPort();  // nothing listens there
  ASSERT_OK(closed);
  EXPECT_THAT(ProbePeers({Peer("w1", "127.0.0.1", (*a)->port()),
                          Peer("w2", "127.0.0.1", *closed),
                          Peer("w3", "no-such-host.invalid", 1)},
                         absl::Seconds(5), RealClock::Get()),
              StatusIs(absl::StatusCode::kUnavailable,
                       AllOf(HasSubstr("worker w2 at 127.0.0.1:"), HasSubstr("refused"),
                             HasSubstr("worker w3 at no-such-host.invalid:1: cannot resolve"),
                             ::testing::Not(HasSubstr("worker w1")))));
}

TEST(PeerProbeTest, PeersWithoutAProbePortAreSkipped) {
  EXPECT_OK(ProbePeers({Peer("w1", "203.0.113.1", 0)}, absl::Seconds(1), RealClock::Get()));
  EXPECT_OK(ProbePeers({}, absl::Seconds(1), RealClock::Get()));
}

TEST(PeerProbeTest, APeerThatNeverAnswersFailsOnceTheTimeoutPassesOnTheClock) {
  FakeClock clock;
  testing::BlackHole hole;
  absl::Status result;
  std::thread probe([&] {
    result = ProbePeers({Peer("w-silent", "127.0.0.1", hole.port())}, absl::Seconds(5), &clock);
  });
  ASSERT_TRUE(clock.AwaitTimerAt(clock.Now() + absl::Seconds(5)));
  clock.Advance(absl::Seconds(5));
  probe.join();
  EXPECT_THAT(result, StatusIs(absl::StatusCode::kUnavailable,
                               HasSubstr(absl::StrCat("worker w-silent at 127.0.0.1:", hole.port(),
                                                      ": no answer within 5s"))));
}

TEST(PeerProbeTest, ListenerStopsOnDestruction) {
  int port = 0;
  {
    absl::StatusOr<std::unique_ptr<ProbeListener>> a = ProbeListener::Start(0);
    ASSERT_OK(a);
    port = (*a)->port();
  }
  EXPECT_THAT(ProbePeers({Peer("w1", "127.0.0.1", port)}, absl::Seconds(5), RealClock::Get()),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("refused")));
}

}  // namespace
}  // namespace baton::worker
