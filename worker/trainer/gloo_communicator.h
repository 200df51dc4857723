#pragma once

// Communicator over c10d's ProcessGroupGloo (CPU tensors), with rendezvous through a c10d
// TCPStore: rank 0 serves the store on master_port, the other ranks connect to
// master_addr:master_port. Gloo then connects every pair of ranks directly.

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/trainer/communicator.h"

namespace baton::trainer {

struct GlooOptions {
  int rank = 0;
  int world_size = 1;
  std::string master_addr;  // Host of rank 0's store.
  int master_port = 0;      // Port rank 0 serves the store on, 1..65535.
  // Namespace for the store keys, e.g. "baton/<job>/<generation>", so that a late process of
  // an older generation cannot join this one's process group.
  std::string store_prefix = "baton";
  // How long to wait for all ranks to reach the store and each other.
  absl::Duration rendezvous_timeout = absl::Minutes(5);
  // How long one collective may take before it fails (a hung peer).
  absl::Duration collective_timeout = absl::Minutes(5);
  // Interface Gloo binds (GLOO_SOCKET_IFNAME). Empty: loopback when master_addr is a
  // loopback address, else the address this host's name resolves to.
  std::string interface;
};

// Joins the process group: blocks until all world_size ranks have connected or the
// rendezvous timeout passes. UNAVAILABLE (naming the address and timeout) on failure,
// INVALID_ARGUMENT on inconsistent options.
absl::StatusOr<std::unique_ptr<Communicator>> ConnectGloo(const GlooOptions& options);

// Builds the process group on an existing store (tests: ranks as threads sharing one
// TCPStore server on port 0). `hostname` is the address Gloo binds, e.g. "127.0.0.1".
// Blocks until all ranks have joined; UNAVAILABLE on failure.
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    absl::Duration collective_timeout, const std::string& hostname);

}  // namespace baton::trainer
