// Fuzz target: a warm standby's request decoder (ReadStandbyRequest), fed the input through
// a socket pair as the worker's handoff arrives. Invariants: no crash and no hang (the
// writer's end is closed, so a short input is EOF); every error is DATA_LOSS (nothing
// sends the ruleset fd a confined "BSR2" request needs, so the decoder never confines
// this process); a decoded request re-encodes to exactly the bytes it was read from.

#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "worker/trainer/contract/standby_protocol.h"
#include "tools/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // Fits the socket buffer: written before reading.
  int sv[2];
  FUZZ_CHECK(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
  int one = 256 * 1024;
  ::setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &one, sizeof(one));
  size_t written = 0;
  while (written < size) {
    const ssize_t n = ::write(sv[0], data + written, size - written);
    FUZZ_CHECK(n > 0);
    written += static_cast<size_t>(n);
  }
  ::close(sv[0]);
  const auto request = baton::trainer::ReadStandbyRequest(sv[1]);
  ::close(sv[1]);
  if (!request.ok()) {
    FUZZ_CHECK(request.status().code() == absl::StatusCode::kDataLoss);
    return 0;
  }
  if (!request->has_value()) {
    FUZZ_CHECK(size == 0);
    return 0;
  }
  FUZZ_CHECK(!(*request)->confined);
  const auto wire = baton::trainer::EncodeStandbyRequest(**request);
  FUZZ_CHECK(wire.ok());
  FUZZ_CHECK(wire->size() <= size && std::memcmp(wire->data(), data, wire->size()) == 0);
  return 0;
}
