#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace baton::worker {

// An address of this host and the network interface that holds it.
struct HostAddress {
  std::string address;    // Numeric, e.g. "198.18.0.2" or "fd00::2".
  std::string interface;  // e.g. "eth0"; what GLOO_SOCKET_IFNAME / NCCL_SOCKET_IFNAME name.
};

// The address this host sends from to reach `target` ("HOST:PORT" or "[V6]:PORT"; HOST may
// be a name) and the interface holding it: the kernel's routing decision, found by
// connecting a UDP socket (no packet is sent). With a coordinator as `target`, this is the
// address other machines on the coordinator's network reach this one at.
// Errors: INVALID_ARGUMENT for a malformed target; UNAVAILABLE if the name does not resolve
// or no route leads to it; NOT_FOUND if no interface holds the chosen address.
absl::StatusOr<HostAddress> RouteTo(const std::string& target);

// The first IPv4 address (else the first IPv6 address that is not link-local) of interface
// `name`. NOT_FOUND if there is no such interface or it has no usable address.
absl::StatusOr<HostAddress> AddressOf(const std::string& name);

}  // namespace baton::worker
