#pragma once

// Hierarchical all-reduce for CPU ranks on several hosts: the ranks of one host reduce
// through shared memory, one leader per host (its lowest rank) all-reduces the host's sum
// with the other leaders over Gloo, in place in the host's segment, and the host's ranks
// copy the result out (shm_communicator.h has the piece-by-piece protocol). Each byte
// crosses the network once per host instead of once per rank, and only the leaders run
// Gloo's threads. Results are bit-identical on every rank (every rank reads the leaders'
// result); sums differ from a flat all-reduce only in the order of additions.
//
// Reduce-scatter and all-gather are composed from these (shm_communicator.h): a
// reduce-scatter is the hierarchical all-reduce of the whole input, of which each rank
// copies out its chunk; an all-gather is one hierarchical broadcast per rank. Correct and
// exact, not bandwidth-optimal (a real one would reduce-scatter across the leaders).
//
// Setup goes through the job's store (keys under "hier/"): each host's ranks attach their
// host's segment ("hier/host<h>/"), then every rank learns whether every host succeeded
// ("hier/local/"), then the leaders connect their Gloo group ("hier/leaders/") and every
// rank learns whether that worked ("hier/joined/"). So every rank gets the same outcome.
//
// Failure: as the shm communicator inside a host (a dead or hung local peer fails the
// collective with UNAVAILABLE); a leader whose Gloo collective fails marks its host's
// segment failed, so its host's ranks fail with UNAVAILABLE too, and the other leaders'
// Gloo collectives fail when its process exits or after the collective timeout.
//
// Threading: as Communicator.

#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/gloo_communicator.h"
#include "worker/trainer/comm/host/host_topology.h"
#include "worker/trainer/comm/host/shm_segment.h"

namespace baton::trainer {

struct HierarchicalOptions {
  // Inside each host. Its collective_timeout also bounds how long a host's ranks wait for
  // their leader's cross-host stage; keep it at least gloo.collective_timeout.
  ShmOptions shm;
  // Between the hosts' leaders.
  GlooOptions gloo;
};

// Builds rank `rank`'s communicator for `topology` (every rank passes the same, e.g. from
// ExchangeHostKeys) through `store`: blocks until every rank joined or one failed.
// INVALID_ARGUMENT if rank is not in the topology or the options are bad;
// FAILED_PRECONDITION, the same on every rank, if shared memory is unusable inside some
// host (callers may fall back to flat Gloo); UNAVAILABLE, on every rank, if the leaders'
// Gloo group could not connect or the store failed.
absl::StatusOr<std::unique_ptr<Communicator>> CreateHierarchicalCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, const HostTopology& topology,
    const HierarchicalOptions& options);

}  // namespace baton::trainer
