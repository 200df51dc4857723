#pragma once

#include "absl/status/statusor.h"

namespace baton::worker {

// Asks the kernel for a free TCP port: binds 0.0.0.0:0, reads the port, closes the socket.
// The port is free when this returns but is not held; whoever uses it (rank 0's TCPStore as
// MASTER_PORT) binds it moments later. Errors: INTERNAL with errno text.
absl::StatusOr<int> ReserveTcpPort();

}  // namespace baton::worker
