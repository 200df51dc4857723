#include "worker/host/peer_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
  return std::unique_ptr<ProbeListener>(new ProbeListener(std::move(fd), bound));
}

ProbeListener::ProbeListener(UniqueFd fd, int port)
    : fd_(std::move(fd)), port_(port), thread_([this] { Loop(); }) {}

ProbeListener::~ProbeListener() {
  ::shutdown(fd_.get(), SHUT_RDWR);  // Wakes accept() with an error.
  thread_.join();
}

void ProbeListener::Loop() {
  for (;;) {
    const int conn = ::accept4(fd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (conn >= 0) {
      ::close(conn);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED || errno == EMFILE || errno == ENFILE) continue;
    return;  // Shut down.
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

// Starts a non-blocking connect; sets error/done when it fails or completes at once.
void Begin(Attempt& a) {
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* found = nullptr;
  const std::string port = absl::StrCat(a.peer->probe_port());
  if (const int rc = ::getaddrinfo(a.peer->host().c_str(), port.c_str(), &hints, &found);
      rc != 0) {
    a.error = absl::StrCat("cannot resolve ", a.peer->host(), ": ", ::gai_strerror(rc));
    a.done = true;
    return;
  }
  a.fd = UniqueFd(::socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!a.fd.valid()) {
    a.error = absl::StrCat("socket: ", std::strerror(errno));
  } else if (::connect(a.fd.get(), found->ai_addr, found->ai_addrlen) == 0) {
    a.done = true;
  } else if (errno != EINPROGRESS) {
    a.error = std::strerror(errno);
  }
  if (!a.error.empty()) a.done = true;
  ::freeaddrinfo(found);
}

}  // namespace

absl::Status ProbePeers(const std::vector<baton::v1::Peer>& peers, absl::Duration timeout,
                        Clock* clock) {
  std::vector<Attempt> attempts;
  attempts.reserve(peers.size());
  for (const baton::v1::Peer& p : peers) {
    if (p.probe_port() <= 0) continue;
    attempts.push_back(Attempt{&p, UniqueFd(), "", false});
    Begin(attempts.back());
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
