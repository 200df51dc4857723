#pragma once

// Communicator over POSIX shared memory, for a world whose ranks all run on one host (CPU
// tensors). Gloo moves every byte of an all-reduce through loopback TCP sockets and its
// own threads; on a CPU host whose cores are all busy training, that costs about as much
// as a compute step. Here the ranks map one segment and reduce in place, rank r owning
// chunk r of each piece:
//
//   each rank copies the other ranks' chunks of its piece into its own slot      (barrier)
//   rank r sums chunk r (its own tensor's part, the others' slots' parts) into its slot,
//     divided by the world size for a mean, and copies it into its tensor       (barrier)
//   each rank copies the other chunks' results out of their owners' slots
//
// So a rank moves only the others' chunks in and out ((L - 1) / L of the data for L ranks)
// and a mean (StartAllReduceMean: the gradient average) costs no pass of its own.
//
// A reduce-scatter on one host moves each piece in once and sums only this rank's chunk:
// every rank copies the piece's part of every chunk into its slot (barrier), then sums its
// own chunk's part over all slots straight into its output. An all-gather: every rank
// copies its piece into its slot (barrier), then every slot's piece into its output. One
// barrier per piece: a buffer is rewritten only after the next piece's barrier.
//
// Tensors larger than a slot go through in pieces; each slot is double-buffered by piece
// parity, so a rank may write piece k+1 while a slower peer still reads piece k. Every rank
// reads the same sum, so results are bit-identical across ranks.
//
// Setup (CreateShmCommunicator) goes through the job's c10d store
// (comm/host/shm_segment.h): if any rank cannot attach (e.g. containers with separate IPC
// namespaces on one node), every rank gets the same FAILED_PRECONDITION and may fall back
// to Gloo.
//
// Failure: a rank waiting for its peers notices a peer's exit or a peer giving up, or
// gives up after `collective_timeout`; the collective then fails with UNAVAILABLE and so
// does every later one (the communicator is broken).
//
// Several hosts (hierarchical_communicator.h builds the parts): each host has its own
// segment, and one leader per host (its lowest rank) runs a cross-host stage on every piece
// between the local reduce and the copy-out, in place on slot 0, which holds the whole sum:
//
//   copy the piece in (barrier) sum chunks into slot 0 (barrier)
//   the leader all-reduces slot 0's piece with the other leaders (barrier)
//   copy out (divided by the world size for a mean)
//
// With several hosts a reduce-scatter is an all-reduce of the whole input of which each
// rank keeps its chunk (the cost of an all-reduce), and an all-gather is one broadcast per
// rank (exact; world_size broadcasts' latency).
//
// A rank alone on its host has no segment: it runs the cross-host stage on its own tensor,
// in the same pieces. A broadcast goes from the root to its host's slot, across the
// leaders, then out of each host's slot. If the leader's cross-host collective fails, it
// marks the segment failed, so its host's ranks fail with UNAVAILABLE too.
//
// Point to point (StartSend, StartRecv): between the ranks of one host, through channels in
// a segment of each pair's own, on threads of their own (shm_point_to_point.h); between
// hosts UNIMPLEMENTED.
//
// Threading: as Communicator. Collectives run in order, one at a time per rank: on a
// communication thread, so StartAllReduceSum returns at once (overlap with backward) and
// Broadcast waits; or, with ShmOptions::collectives_on_waiter, on the thread that waits for
// them (Wait runs every collective queued up to its own), for hosts where that thread
// would have no core of its own. A collective started and never waited for is then handed to
// the communication thread when its PendingCollective is destroyed.

#include <c10/core/ScalarType.h>

#include <functional>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/host/host_topology.h"
#include "worker/trainer/comm/host/shm_segment.h"

namespace baton::trainer {

// Builds the communicator through `store` (keys under "shm/"): blocks until every rank
// attached or one failed to. INVALID_ARGUMENT if rank is not in [0, world_size) or
// world_size > 256; FAILED_PRECONDITION, the same on every rank, if some rank could not
// map the segment or see its peers; UNAVAILABLE if the store failed.
absl::StatusOr<std::unique_ptr<Communicator>> CreateShmCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size,
    const ShmOptions& options);

// The parts of one rank's communicator in a world of one or more hosts.
struct ShmGroup {
  // The job's store, kept alive (rank 0 serves it to peers still reading setup keys).
  c10::intrusive_ptr<c10d::Store> store;
  HostTopology topology;
  int rank = 0;
  // This rank's host's segment, the host's ranks in order as members; may be null if the
  // rank is alone on its host.
  std::unique_ptr<ShmSegment> segment;
  // On a host's leader when there are several hosts: the collectives between the leaders
  // (rank = host index, world = number of hosts). Null everywhere else.
  std::unique_ptr<Communicator> leaders;
  // With several hosts: what the leaders' collectives can sum (the same on every rank).
  std::function<bool(c10::ScalarType)> leaders_reduce;
  // For backend().
  std::string backend = "shm";
};

// A communicator over `group` (every rank must pass the same options: pieces are cut from
// slot_bytes). INVALID_ARGUMENT if the parts do not fit the topology.
absl::StatusOr<std::unique_ptr<Communicator>> NewShmCommunicator(ShmGroup group,
                                                                 const ShmOptions& options);

}  // namespace baton::trainer
