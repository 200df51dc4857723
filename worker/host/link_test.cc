#include "worker/host/link_test.h"

#include <errno.h>
#include <linux/tcp.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/time/proto_time.h"
#include "worker/host/clock_poll.h"
#include "worker/host/peer_probe.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {
namespace {

constexpr size_t kChunk = 256 << 10;

// Bytes of payload the peer's TCP acknowledged on `fd`; -1 if the kernel cannot say.
int64_t BytesAcked(int fd) {
  struct tcp_info info = {};
  socklen_t len = sizeof(info);
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
      len < offsetof(struct tcp_info, tcpi_bytes_acked) + sizeof(info.tcpi_bytes_acked)) {
    return -1;
  }
  return static_cast<int64_t>(info.tcpi_bytes_acked);
}

// Ends the connection at once with a reset, so that bytes still queued are not sent.
void Abort(UniqueFd& fd) {
  struct linger hard = {1, 0};
  ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &hard, sizeof(hard));
  fd = UniqueFd();
}

}  // namespace

baton::v1::LinkMeasurement MeasureLink(const baton::v1::Peer& peer, const LinkTestOptions& options,
                                       Clock* clock) {
  baton::v1::LinkMeasurement out;
  out.set_peer_worker_id(peer.worker_id());
  const std::string where = absl::StrCat(peer.host(), ":", peer.probe_port());
  const auto fail = [&](const std::string& why) {
    out.set_error(absl::StrCat(where, ": ", why));
    out.set_bytes(0);
    return out;
  };
  if (peer.probe_port() <= 0) return fail("the peer has no probe port");
  ProbeConnect connect = StartProbeConnect(peer, clock);
  if (!connect.error.empty()) return fail(connect.error);
  UniqueFd fd = std::move(connect.fd);
  const absl::Time begin = connect.started;
  if (!connect.connected) {
    std::vector<struct pollfd> fds = {{fd.get(), POLLOUT, 0}};
    absl::StatusOr<int> n = PollUntil(clock, begin + options.connect_timeout, fds);
    if (!n.ok()) return fail(std::string(n.status().message()));
    if (*n == 0) {
      return fail(absl::StrCat("no answer within ", absl::FormatDuration(options.connect_timeout)));
    }
    int err = 0;
    socklen_t len = sizeof(err);
    ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return fail(std::strerror(err));
  }
  const absl::Time start = clock->Now();
  *out.mutable_connect_latency() = ToProto(start - begin);
  const absl::Time deadline = start + options.window;

  static const std::vector<char>* const kZeros = new std::vector<char>(kChunk, 0);
  int64_t sent = 0;
  bool all_sent = false;
  while (!all_sent) {
    std::vector<struct pollfd> fds = {{fd.get(), POLLOUT, 0}};
    absl::StatusOr<int> n = PollUntil(clock, deadline, fds);
    if (!n.ok()) return fail(std::string(n.status().message()));
    if (*n == 0) break;  // The window ended.
    const size_t want = static_cast<size_t>(std::min<int64_t>(kChunk, options.max_bytes - sent));
    const ssize_t w = ::send(fd.get(), kZeros->data(), want, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) continue;
      return fail(
          absl::StrCat("the connection broke after ", sent, " bytes: ", std::strerror(errno)));
    }
    sent += w;
    all_sent = sent >= options.max_bytes;
  }
  if (all_sent) {
    // The peer closes once it read everything: that close is the measurement's end.
    ::shutdown(fd.get(), SHUT_WR);
    const absl::Time drain_deadline = clock->Now() + options.window;
    for (;;) {
      std::vector<struct pollfd> fds = {{fd.get(), POLLIN, 0}};
      absl::StatusOr<int> n = PollUntil(clock, drain_deadline, fds);
      if (!n.ok() || *n == 0) break;
      char byte;
      const ssize_t r = ::recv(fd.get(), &byte, 1, MSG_DONTWAIT);
      if (r == 0) {
        out.set_bytes(sent);
        *out.mutable_duration() = ToProto(clock->Now() - start);
        return out;
      }
      if (r < 0 && errno != EAGAIN && errno != EINTR) break;
    }
  }
  const absl::Time end = clock->Now();
  const int64_t acked = BytesAcked(fd.get());
  if (acked < 0) return fail("the kernel does not report acknowledged bytes (TCP_INFO)");
  out.set_bytes(std::min(acked, sent));
  *out.mutable_duration() = ToProto(end - start);
  Abort(fd);
  return out;
}

}  // namespace baton::worker
