#include "worker/host/peer_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "worker/host/clock_poll.h"

namespace baton::worker {

absl::StatusOr<std::unique_ptr<ProbeListener>> ProbeListener::Start(int port) {
  UniqueFd fd(::socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0));
  const bool v6 = fd.valid();
  if (!v6) fd = UniqueFd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  const int on = 1, off = 0;
  ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
  struct sockaddr_storage addr = {};
  socklen_t len;
  if (v6) {
    ::setsockopt(fd.get(), IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));  // v4 too
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6;
    a->sin6_addr = in6addr_any;
    a->sin6_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*a);
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_ANY);
    a->sin_port = htons(static_cast<uint16_t>(port));
    len = sizeof(*a);
  }
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(fd.get(), 128) != 0) {
    return absl::InternalError(
        absl::StrCat("probe listener on port ", port, ": ", std::strerror(errno)));
  }
  len = sizeof(addr);
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len);
  const int bound = ntohs(v6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                             : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  UniqueFd wake(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!wake.valid()) return absl::InternalError(absl::StrCat("eventfd: ", std::strerror(errno)));
  return std::unique_ptr<ProbeListener>(new ProbeListener(std::move(fd), std::move(wake), bound));
}

ProbeListener::ProbeListener(UniqueFd fd, UniqueFd wake, int port)
    : fd_(std::move(fd)), wake_(std::move(wake)), port_(port), thread_([this] { Loop(); }) {}

ProbeListener::~ProbeListener() {
  const uint64_t one = 1;
  (void)!::write(wake_.get(), &one, sizeof(one));
  thread_.join();
}

void ProbeListener::Loop() {
  struct Conn {
    UniqueFd fd;
    absl::Time last_data;
  };
  std::vector<Conn> conns;
  std::vector<char> buffer(256 << 10);
  for (;;) {
    std::vector<struct pollfd> fds = {{wake_.get(), POLLIN, 0}, {fd_.get(), POLLIN, 0}};
    for (const Conn& c : conns) fds.push_back({c.fd.get(), POLLIN, 0});
    // Wakes at least every second to close idle connections.
    if (::poll(fds.data(), fds.size(), conns.empty() ? -1 : 1000) < 0) {
      if (errno == EINTR) continue;
      BATON_LOG(ERROR) << "probe listener: poll: " << std::strerror(errno);
      return;
    }
    if (fds[0].revents != 0) return;  // Destroyed.
    const absl::Time now = absl::Now();
    std::vector<Conn> open;
    open.reserve(conns.size() + 1);
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn& c = conns[i];
      bool keep = now - c.last_data < kIdleLimit;
      if (fds[i + 2].revents != 0) {
        // Reads what is there (a bounded number of times, so one fast sender cannot starve
        // the others); 0: the peer closed its side (a probe, or a measurement's end).
        for (int reads = 0; reads < 16; ++reads) {
          const ssize_t n = ::recv(c.fd.get(), buffer.data(), buffer.size(), MSG_DONTWAIT);
          if (n > 0) {
            c.last_data = now;
            continue;
          }
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
          keep = false;  // EOF, or the connection broke (a measurement's reset).
          break;
        }
      }
      if (keep) open.push_back(std::move(c));
    }
    conns = std::move(open);
    if (fds[1].revents != 0) {
      const int conn = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (conn >= 0) {
        UniqueFd accepted(conn);
        if (static_cast<int>(conns.size()) < kMaxConnections) {
          conns.push_back(Conn{std::move(accepted), now});
        }  // else closed here: the bound holds.
      } else if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED && errno != EMFILE &&
                 errno != ENFILE) {
        BATON_LOG(ERROR) << "probe listener: accept: " << std::strerror(errno);
        return;
      }
    }
  }
}

namespace {

struct Attempt {
  const baton::v1::Peer* peer;
  UniqueFd fd;
  std::string error;  // Empty while pending or once connected.
  bool done = false;
};

std::string Where(const baton::v1::Peer& p) {
  return absl::StrCat("worker ", p.worker_id(), " at ", p.host(), ":", p.probe_port());
}

}  // namespace

ProbeConnect StartProbeConnect(const baton::v1::Peer& peer, Clock* clock) {
  ProbeConnect c;
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* found = nullptr;
  const std::string port = absl::StrCat(peer.probe_port());
  if (const int rc = ::getaddrinfo(peer.host().c_str(), port.c_str(), &hints, &found); rc != 0) {
    c.error = absl::StrCat("cannot resolve ", peer.host(), ": ", ::gai_strerror(rc));
    return c;
  }
  c.fd = UniqueFd(::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!c.fd.valid()) {
    c.error = absl::StrCat("socket: ", std::strerror(errno));
  } else {
    c.started = clock->Now();
    if (::connect(c.fd.get(), found->ai_addr, found->ai_addrlen) == 0) {
      c.connected = true;
    } else if (errno != EINPROGRESS) {
      c.error = std::strerror(errno);
    }
  }
  ::freeaddrinfo(found);
  return c;
}

absl::Status ProbePeers(const std::vector<baton::v1::Peer>& peers, absl::Duration timeout,
                        Clock* clock) {
  std::vector<Attempt> attempts;
  attempts.reserve(peers.size());
  for (const baton::v1::Peer& p : peers) {
    if (p.probe_port() <= 0) continue;
    ProbeConnect c = StartProbeConnect(p, clock);
    const bool done = c.connected || !c.error.empty();
    attempts.push_back(Attempt{&p, std::move(c.fd), std::move(c.error), done});
  }
  const absl::Time deadline = clock->Now() + timeout;
  for (;;) {
    std::vector<struct pollfd> fds;
    std::vector<Attempt*> pending;
    for (Attempt& a : attempts) {
      if (a.done) continue;
      fds.push_back({a.fd.get(), POLLOUT, 0});
      pending.push_back(&a);
    }
    if (pending.empty()) break;
    absl::StatusOr<int> n = PollUntil(clock, deadline, fds);
    if (!n.ok()) return n.status();
    if (*n == 0) break;  // The deadline passed.
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      int err = 0;
      socklen_t len = sizeof(err);
      ::getsockopt(fds[i].fd, SOL_SOCKET, SO_ERROR, &err, &len);
      pending[i]->done = true;
      if (err != 0) pending[i]->error = std::strerror(err);
    }
  }
  std::vector<std::string> failed;
  for (const Attempt& a : attempts) {
    if (!a.done) {
      failed.push_back(absl::StrCat(Where(*a.peer), ": no answer within ",
                                    absl::FormatDuration(timeout)));
    } else if (!a.error.empty()) {
      failed.push_back(absl::StrCat(Where(*a.peer), ": ", a.error));
    }
  }
  if (failed.empty()) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      "cannot reach ", absl::StrJoin(failed, "; "),
      " (check that worker's --advertise_host/--interface and the network between the hosts)"));
}

}  // namespace baton::worker
