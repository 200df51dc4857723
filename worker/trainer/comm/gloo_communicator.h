#pragma once

// Communicator over c10d's ProcessGroupGloo (CPU tensors) on an existing c10d store
// (process_group.h connects one). Gloo connects every pair of ranks directly.

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/trainer/comm/communicator.h"

namespace baton::trainer {

struct GlooOptions {
  // How long one collective may take before it fails (a hung peer).
  absl::Duration collective_timeout = absl::Minutes(5);
  // Address to bind, chosen by the first that is set: `interface` (a NIC name, as
  // GLOO_SOCKET_IFNAME), `hostname` (e.g. "127.0.0.1"), else the address this host's
  // name resolves to.
  std::string interface;
  std::string hostname;
};

// Builds the process group: blocks until all world_size ranks have joined through
// `store` (tests: ranks as threads sharing one TCPStore server on port 0) and every rank is
// connected (a barrier), so a rank may destroy its communicator right away. INVALID_ARGUMENT
// if rank is not in [0, world_size); UNAVAILABLE if the peers cannot be connected.
absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    const GlooOptions& options);

}  // namespace baton::trainer
