#pragma once

// Peer reachability: before a worker starts a job's processes it checks that it can open a
// TCP connection to every other worker of the generation at the address that worker
// advertised (what MASTER_ADDR and Gloo's peers will dial). A wrong --advertise_host or a
// cut network then fails the generation at once with the addresses named, instead of ranks
// hanging in their rendezvous.

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {

// What peers probe and measure: accepts TCP connections on a port, reads and discards
// whatever arrives, and closes each connection once its peer closed its side (a reachability
// probe at once; a pre-flight link measurement, worker/host/link_test.h, at its end).
// Bounded: at most kMaxConnections at once (more are closed on accept), each closed after
// kIdleLimit without data (real time: a resource bound, not a domain timeout). Reads only
// into one fixed buffer: a stranger who connects can cost this host bandwidth, nothing
// else (docs/SECURITY.md). Thread-safe; one background thread.
class ProbeListener {
 public:
  static constexpr int kMaxConnections = 64;
  static constexpr absl::Duration kIdleLimit = absl::Seconds(30);

  // Listens on all interfaces at `port` (0: the kernel picks). INTERNAL naming the errno
  // if it cannot bind.
  static absl::StatusOr<std::unique_ptr<ProbeListener>> Start(int port);
  ~ProbeListener();  // Stops accepting, closes every connection and joins the thread.

  int port() const { return port_; }

 private:
  ProbeListener(UniqueFd fd, UniqueFd wake, int port);
  void Loop();

  UniqueFd fd_;
  UniqueFd wake_;  // an eventfd: the destructor writes it to end Loop()
  const int port_;
  std::thread thread_;
};

// A TCP connect to a peer's host:probe_port, started without blocking (what ProbePeers
// and a pre-flight's MeasureLink both begin with).
struct ProbeConnect {
  UniqueFd fd;             // the non-blocking socket; invalid on error
  bool connected = false;  // completed at once (else wait for POLLOUT, then SO_ERROR)
  std::string error;       // non-empty: failed at once ("cannot resolve <host>: ...", errno)
  absl::Time started;      // on `clock`, just before connect(2): a round trip's start
};
ProbeConnect StartProbeConnect(const baton::v1::Peer& peer, Clock* clock);

// Connects to every peer's host:probe_port at once and waits up to `timeout`, measured by
// `clock`, for all of them. OK if every connection opened; else UNAVAILABLE naming each peer
// that failed, its address and why (refused, no answer within the timeout, no route, name not
// resolved). Peers without a probe port are skipped.
absl::Status ProbePeers(const std::vector<baton::v1::Peer>& peers, absl::Duration timeout,
                        Clock* clock);

}  // namespace baton::worker
