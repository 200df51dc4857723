#include "worker/host/preflight.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/link_bandwidth.h"
#include "common/testing/status_matchers.h"
#include "common/time/clock.h"
#include "common/time/proto_time.h"
#include "common/time/testing/fake_clock.h"
#include "worker/host/host_checks.h"
#include "worker/host/link_test.h"
#include "worker/host/peer_probe.h"
#include "worker/host/reserve_port.h"
#include "worker/testing/black_hole.h"

namespace baton::worker {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

baton::v1::Peer Peer(const std::string& id, const std::string& host, int port) {
  baton::v1::Peer p;
  p.set_worker_id(id);
  p.set_host(host);
  p.set_probe_port(port);
  return p;
}

std::unique_ptr<ProbeListener> Listener() {
  absl::StatusOr<std::unique_ptr<ProbeListener>> l = ProbeListener::Start(0);
  EXPECT_OK(l);
  return l.ok() ? std::move(*l) : nullptr;
}

// A plain TCP connection to 127.0.0.1:port; -1 on failure.
int Dial(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

// Whether the listener closed `fd` within 10 s (a poll with a deadline on a real socket).
bool ClosedByPeer(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  if (::poll(&p, 1, 10000) != 1) return false;
  char byte;
  return ::recv(fd, &byte, 1, 0) <= 0;
}

TEST(LinkTestTest, StreamsForTheWindowAndCountsWhatThePeerAcknowledged) {
  std::unique_ptr<ProbeListener> peer = Listener();
  LinkTestOptions options;
  options.window = absl::Milliseconds(100);
  const baton::v1::LinkMeasurement m =
      MeasureLink(Peer("w2", "127.0.0.1", peer->port()), options, RealClock::Get());
  EXPECT_THAT(m.error(), IsEmpty());
  EXPECT_EQ(m.peer_worker_id(), "w2");
  EXPECT_GT(m.bytes(), 0);
  EXPECT_GE(FromProto(m.duration()), options.window);  // measured over the whole window
  EXPECT_TRUE(m.has_connect_latency());
  EXPECT_GT(LinkBandwidth(m), 0);
  // The listener served it and serves the next one.
  EXPECT_THAT(MeasureLink(Peer("w2", "localhost", peer->port()), options, RealClock::Get()).error(),
              IsEmpty());
}

TEST(LinkTestTest, ABoundedTransferEndsWhenThePeerReadItAll) {
  std::unique_ptr<ProbeListener> peer = Listener();
  LinkTestOptions options;
  options.window = absl::Seconds(30);
  options.max_bytes = 3 << 20;
  const baton::v1::LinkMeasurement m =
      MeasureLink(Peer("w2", "127.0.0.1", peer->port()), options, RealClock::Get());
  EXPECT_THAT(m.error(), IsEmpty());
  EXPECT_EQ(m.bytes(), 3 << 20);
  EXPECT_LT(FromProto(m.duration()), options.window);
}

TEST(LinkTestTest, AnUnreachablePeerIsAnErrorNamingItsAddress) {
  absl::StatusOr<int> closed = ReserveTcpPort();  // nothing listens there
  ASSERT_OK(closed);
  const baton::v1::LinkMeasurement m =
      MeasureLink(Peer("w9", "127.0.0.1", *closed), LinkTestOptions(), RealClock::Get());
  EXPECT_THAT(m.error(),
              AllOf(HasSubstr(absl::StrCat("127.0.0.1:", *closed)), HasSubstr("refused")));
  EXPECT_EQ(m.bytes(), 0);
  EXPECT_EQ(LinkBandwidth(m), 0);
  EXPECT_THAT(
      MeasureLink(Peer("w9", "no-such-host.invalid", 1), LinkTestOptions(), RealClock::Get())
          .error(),
      HasSubstr("cannot resolve"));
}

TEST(LinkTestTest, APeerThatNeverAnswersFailsAtTheConnectTimeoutOnTheClock) {
  FakeClock clock;
  testing::BlackHole hole;
  LinkTestOptions options;
  options.connect_timeout = absl::Seconds(2);
  baton::v1::LinkMeasurement m;
  std::thread t([&] { m = MeasureLink(Peer("w3", "127.0.0.1", hole.port()), options, &clock); });
  ASSERT_TRUE(clock.AwaitTimerAt(clock.Now() + absl::Seconds(2)));
  clock.Advance(absl::Seconds(2));
  t.join();
  EXPECT_THAT(m.error(), HasSubstr("no answer within 2s"));
}

TEST(ProbeListenerTest, BoundsItsConnectionsAndKeepsServing) {
  std::unique_ptr<ProbeListener> listener = Listener();
  std::vector<int> held;
  for (int i = 0; i < ProbeListener::kMaxConnections; ++i) {
    const int fd = Dial(listener->port());
    ASSERT_GE(fd, 0);
    held.push_back(fd);
  }
  // One more than the bound: accepted by the kernel, closed by the listener.
  const int extra = Dial(listener->port());
  ASSERT_GE(extra, 0);
  EXPECT_TRUE(ClosedByPeer(extra));
  ::close(extra);
  // Once the held ones close, the listener serves again.
  for (int fd : held) ::close(fd);
  LinkTestOptions options;
  options.window = absl::Milliseconds(50);
  EXPECT_THAT(
      MeasureLink(Peer("w1", "127.0.0.1", listener->port()), options, RealClock::Get()).error(),
      IsEmpty());
}

TEST(HostChecksTest, SharedMemoryIsWrittenAndReadBack) {
  const std::string dir = std::getenv("TEST_TMPDIR");
  const baton::v1::HostCheck ok = CheckSharedMemory(dir, 4 << 20);
  EXPECT_EQ(ok.name(), "shm");
  EXPECT_TRUE(ok.ok()) << ok.detail();
  EXPECT_THAT(ok.detail(), HasSubstr("4 MiB written and read back"));
  const baton::v1::HostCheck missing = CheckSharedMemory(dir + "/no-such-dir", 4 << 20);
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(missing.detail(), AllOf(HasSubstr("cannot create"), HasSubstr("no-such-dir")));
}

TEST(HostChecksTest, AMissingGpuOrOneNvmlCannotOpenFailsTheCheck) {
  std::vector<baton::v1::Gpu> two(2);
  EXPECT_TRUE(CheckGpus(2, two, NvmlView()).ok());
  const baton::v1::HostCheck gone = CheckGpus(2, {two[0]}, NvmlView());
  EXPECT_FALSE(gone.ok());
  EXPECT_THAT(gone.detail(), HasSubstr("the driver lists 1 GPU(s), the worker registered 2"));
  NvmlView nvml;
  nvml.present = true;
  nvml.device_count = 2;
  nvml.errors = {"GPU 1: GPU is lost"};
  const baton::v1::HostCheck lost = CheckGpus(2, two, nvml);
  EXPECT_FALSE(lost.ok());
  EXPECT_THAT(lost.detail(), HasSubstr("NVML: GPU 1: GPU is lost"));
}

TEST(PreflightTest, MeasuresEveryLinkAndChecksTheHost) {
  std::unique_ptr<ProbeListener> a = Listener();
  std::unique_ptr<ProbeListener> b = Listener();
  absl::StatusOr<int> closed = ReserveTcpPort();
  ASSERT_OK(closed);
  baton::v1::RunPreflight req;
  req.set_job_id("j-1");
  req.set_generation(3);
  *req.add_send_to() = Peer("w2", "127.0.0.1", a->port());
  *req.add_send_to() = Peer("w3", "127.0.0.1", b->port());
  *req.add_send_to() = Peer("w4", "127.0.0.1", *closed);
  *req.mutable_link_window() = ToProto(absl::Milliseconds(100));
  PreflightHost host;
  host.shm_dir = std::getenv("TEST_TMPDIR");
  host.shm_bytes = 1 << 20;
  host.registered_gpus = 1;
  host.detect_gpus = [] { return std::vector<baton::v1::Gpu>(); };  // the GPU is gone
  const baton::v1::PreflightResult r = RunPreflight(req, host, RealClock::Get());
  EXPECT_EQ(r.job_id(), "j-1");
  EXPECT_EQ(r.generation(), 3);
  ASSERT_THAT(r.links(), SizeIs(3));
  EXPECT_EQ(r.links(0).peer_worker_id(), "w2");
  EXPECT_GT(r.links(0).bytes(), 0);
  EXPECT_GT(r.links(1).bytes(), 0);
  EXPECT_THAT(r.links(2).error(), HasSubstr("refused"));
  ASSERT_THAT(r.checks(), SizeIs(2));
  EXPECT_TRUE(r.checks(0).ok()) << r.checks(0).detail();
  EXPECT_EQ(r.checks(1).name(), "gpu");
  EXPECT_FALSE(r.checks(1).ok());
}

}  // namespace
}  // namespace baton::worker
