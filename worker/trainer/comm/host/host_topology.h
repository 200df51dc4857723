#pragma once

// Which ranks of a job share a host, found out through the job's c10d store: every rank
// publishes a host key and ranks with equal keys form a host. The hierarchical CPU
// communicator (comm/hierarchical_communicator.h) reduces inside each host through shared
// memory and between hosts through one leader per host.
//
// A key only proposes a grouping: whether the ranks of a "host" can really share memory is
// still found out by trying (shm_segment.h).

#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "absl/status/statusor.h"

namespace baton::trainer {

// Ranks grouped by host. Hosts are numbered in the order of their lowest rank, which is
// the host's leader; every rank of the world is on exactly one host.
struct HostTopology {
  // hosts[h]: the ranks on host h, increasing; hosts[h][0] is its leader.
  std::vector<std::vector<int>> hosts;
  // host_of[r]: rank r's host; local_rank_of[r]: r's index in hosts[host_of[r]].
  std::vector<int> host_of;
  std::vector<int> local_rank_of;

  int world_size() const { return static_cast<int>(host_of.size()); }
  int num_hosts() const { return static_cast<int>(hosts.size()); }
  bool IsLeader(int rank) const { return local_rank_of[rank] == 0; }
  // Whether some host has more than one rank (something to gain from shared memory).
  bool AnyHostShared() const;
  // "2 hosts: 0,1 | 2,3", for logs and messages.
  std::string ToString() const;
};

// Groups ranks by equal keys (keys[r] is rank r's); a pure function.
HostTopology GroupByHostKey(const std::vector<std::string>& keys);

// All ranks on one host.
HostTopology SingleHost(int world_size);

// This machine's key, from what differs between machines and between containers that
// cannot share /dev/shm: the kernel's boot id (the host name where unreadable), the
// device id of /dev/shm's filesystem, and this process's PID namespace (peers must see
// each other's processes to detect an exit).
std::string DefaultHostKey();

// Publishes this rank's key (`key`, or DefaultHostKey() if empty) under "hosts/<rank>" in
// `store` and reads every rank's: blocks until all ranks published. INVALID_ARGUMENT if
// rank is not in [0, world_size); UNAVAILABLE if the store failed or timed out.
absl::StatusOr<HostTopology> ExchangeHostKeys(const c10::intrusive_ptr<c10d::Store>& store,
                                              int rank, int world_size, std::string key);

}  // namespace baton::trainer
