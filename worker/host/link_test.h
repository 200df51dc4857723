#pragma once

// One link of a pre-flight check (RunPreflight, worker_service.proto): this worker streams
// data to a peer's ProbeListener (worker/host/peer_probe.h) for a window and reads from its
// own TCP stack how much the peer acknowledged. No protocol on top of TCP: the listener
// discards whatever arrives, so the measure is the path between the two hosts (their
// NICs, the network, the kernels), which the job's collectives will share.

#include "absl/time/time.h"
#include "baton/v1/worker_service.pb.h"
#include "common/time/clock.h"

namespace baton::worker {

struct LinkTestOptions {
  // How long data is streamed once connected.
  absl::Duration window = absl::Milliseconds(200);
  // How long the TCP connect may take (a peer that does not answer: an error).
  absl::Duration connect_timeout = absl::Seconds(2);
  // At most this many bytes are sent (a bound on the traffic; reached before the window
  // ends only on links faster than 20 GB/s at the default window).
  int64_t max_bytes = int64_t{4} << 30;
};

// Streams to `peer` (its host:probe_port) for options.window, measured on `clock`, and
// returns the measurement: peer_worker_id, bytes the peer's TCP acknowledged, the
// duration from connect to the window's end (or to the peer's close after max_bytes),
// and connect_latency. `error` names the address and why when the peer cannot be reached
// or the connection broke; no bytes are counted then. Never blocks longer than
// connect_timeout + window (+ the window again after max_bytes). Thread-safe.
baton::v1::LinkMeasurement MeasureLink(const baton::v1::Peer& peer, const LinkTestOptions& options,
                                       Clock* clock);

}  // namespace baton::worker
