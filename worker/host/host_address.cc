#include "worker/host/host_address.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <memory>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "worker/process/unique_fd.h"

namespace baton::worker {
namespace {

// Numeric text of an AF_INET/AF_INET6 address; empty for other families.
std::string Numeric(const struct sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    ::inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, buf, sizeof(buf));
  } else if (sa->sa_family == AF_INET6) {
    ::inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, buf,
                sizeof(buf));
  }
  return buf;
}

bool LinkLocal6(const struct sockaddr* sa) {
  return sa->sa_family == AF_INET6 &&
         IN6_IS_ADDR_LINKLOCAL(&reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr);
}

struct IfaddrsDeleter {
  void operator()(struct ifaddrs* p) const { ::freeifaddrs(p); }
};
using Ifaddrs = std::unique_ptr<struct ifaddrs, IfaddrsDeleter>;

absl::StatusOr<Ifaddrs> ListInterfaces() {
  struct ifaddrs* list = nullptr;
  if (::getifaddrs(&list) != 0) {
    return absl::InternalError(absl::StrCat("getifaddrs: ", std::strerror(errno)));
  }
  return Ifaddrs(list);
}

struct AddrinfoDeleter {
  void operator()(struct addrinfo* p) const { ::freeaddrinfo(p); }
};

}  // namespace

absl::StatusOr<HostAddress> RouteTo(const std::string& target) {
  std::string host, port;
  if (!target.empty() && target.front() == '[') {
    const size_t close = target.find(']');
    if (close == std::string::npos || close + 1 >= target.size() || target[close + 1] != ':') {
      return absl::InvalidArgumentError(
          absl::StrCat("'", target, "' is not [IPV6]:PORT"));
    }
    host = target.substr(1, close - 1);
    port = target.substr(close + 2);
  } else {
    const size_t colon = target.rfind(':');
    if (colon == std::string::npos || colon == 0) {
      return absl::InvalidArgumentError(absl::StrCat("'", target, "' is not HOST:PORT"));
    }
    host = target.substr(0, colon);
    port = target.substr(colon + 1);
  }
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number) || port_number < 1 || port_number > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", target, "': port must be a number in 1..65535"));
  }
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  struct addrinfo* found = nullptr;
  if (const int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(
        absl::StrCat("resolving '", host, "': ", ::gai_strerror(rc)));
  }
  std::unique_ptr<struct addrinfo, AddrinfoDeleter> addresses(found);
  std::string error = "no address";
  for (const struct addrinfo* a = found; a != nullptr; a = a->ai_next) {
    UniqueFd fd(::socket(a->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!fd.valid()) {
      error = absl::StrCat("socket: ", std::strerror(errno));
      continue;
    }
    if (::connect(fd.get(), a->ai_addr, a->ai_addrlen) != 0) {
      error = absl::StrCat("no route to ", Numeric(a->ai_addr), ": ", std::strerror(errno));
      continue;
    }
    struct sockaddr_storage local = {};
    socklen_t len = sizeof(local);
    if (::getsockname(fd.get(), reinterpret_cast<struct sockaddr*>(&local), &len) != 0) {
      error = absl::StrCat("getsockname: ", std::strerror(errno));
      continue;
    }
    const std::string address = Numeric(reinterpret_cast<struct sockaddr*>(&local));
    absl::StatusOr<Ifaddrs> interfaces = ListInterfaces();
    if (!interfaces.ok()) return interfaces.status();
    for (const struct ifaddrs* i = interfaces->get(); i != nullptr; i = i->ifa_next) {
      if (i->ifa_addr != nullptr && Numeric(i->ifa_addr) == address) {
        return HostAddress{address, i->ifa_name};
      }
    }
    return absl::NotFoundError(
        absl::StrCat("the route to ", target, " leaves from ", address,
                     ", which no interface of this host holds"));
  }
  return absl::UnavailableError(absl::StrCat("no route to ", target, ": ", error));
}

absl::StatusOr<HostAddress> AddressOf(const std::string& name) {
  absl::StatusOr<Ifaddrs> interfaces = ListInterfaces();
  if (!interfaces.ok()) return interfaces.status();
  bool exists = false;
  std::string v6;
  for (const struct ifaddrs* i = interfaces->get(); i != nullptr; i = i->ifa_next) {
    if (name != i->ifa_name) continue;
    exists = true;
    if (i->ifa_addr == nullptr) continue;
    if (i->ifa_addr->sa_family == AF_INET) return HostAddress{Numeric(i->ifa_addr), name};
    if (i->ifa_addr->sa_family == AF_INET6 && v6.empty() && !LinkLocal6(i->ifa_addr)) {
      v6 = Numeric(i->ifa_addr);
    }
  }
  if (!v6.empty()) return HostAddress{v6, name};
  return absl::NotFoundError(exists ? absl::StrCat("interface ", name, " has no usable address")
                                    : absl::StrCat("no interface named ", name));
}

}  // namespace baton::worker
