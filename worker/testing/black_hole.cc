#include "worker/testing/black_hole.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace baton::worker::testing {

BlackHole::BlackHole() {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = {};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::listen(listener_, 0);
  socklen_t len = sizeof(addr);
  ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  for (int i = 0; i < 4; ++i) {  // Fill the backlog.
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
    fillers_.push_back(fd);
  }
}

BlackHole::~BlackHole() {
  for (int fd : fillers_) ::close(fd);
  ::close(listener_);
}

}  // namespace baton::worker::testing
