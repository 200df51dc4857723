#include "worker/trainer/comm/hierarchical_communicator.h"

#include <exception>
#include <string>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "worker/trainer/device/compat.h"
#include "worker/trainer/comm/shm_communicator.h"
#include "worker/trainer/comm/host/store_protocol.h"

namespace baton::trainer {

absl::StatusOr<std::unique_ptr<Communicator>> CreateHierarchicalCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, const HostTopology& topology,
    const HierarchicalOptions& options) {
  const int world_size = topology.world_size();
  if (rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " not in world of ", world_size));
  }
  RETURN_IF_ERROR(ValidateShmOptions(options.shm));
  const int host = topology.host_of[rank];
  const std::vector<int>& host_ranks = topology.hosts[host];
  ShmGroup group;
  group.store = store;
  group.topology = topology;
  group.rank = rank;
  group.backend = absl::StrCat("hierarchical(shm+gloo, ", topology.num_hosts(),
                               topology.num_hosts() == 1 ? " host)" : " hosts)");
  try {
    auto hier = c10::make_intrusive<c10d::PrefixStore>("hier", store);
    // 1. Shared memory inside each host: a group's members all get the same outcome...
    absl::Status local;
    if (host_ranks.size() > 1) {
      c10d::PrefixStore host_store(absl::StrCat("host", host), hier);
      absl::StatusOr<std::unique_ptr<ShmSegment>> segment = ShmSegment::Attach(
          host_store, topology.local_rank_of[rank], host_ranks, options.shm);
      if (segment.ok()) {
        group.segment = std::move(*segment);
      } else {
        local = absl::Status(segment.status().code(),
                             absl::StrCat("host ", host, " (ranks ", absl::StrJoin(host_ranks, ","),
                                          "): ", segment.status().message()));
      }
    }
    // ... and then every rank learns every host's.
    RETURN_IF_ERROR(AgreeOn(*hier, "local", rank, world_size, local, ""));
    // 2. The leaders' Gloo group, numbered by host.
    absl::Status joined;
    if (topology.num_hosts() > 1) {
      group.leaders_reduce = &compat::GlooReduces;
      if (topology.IsLeader(rank)) {
        auto leaders_store = c10::make_intrusive<c10d::PrefixStore>("leaders", hier);
        absl::StatusOr<std::unique_ptr<Communicator>> leaders =
            CreateGlooCommunicator(leaders_store, host, topology.num_hosts(), options.gloo);
        if (leaders.ok()) {
          group.leaders = std::move(*leaders);
        } else {
          joined = absl::Status(leaders.status().code(),
                                absl::StrCat("leaders of ", topology.ToString(), ": ",
                                             leaders.status().message()));
        }
      }
    }
    RETURN_IF_ERROR(AgreeOn(*hier, "joined", rank, world_size, joined, ""));
  } catch (const std::exception& e) {
    const std::string message = e.what();
    return absl::UnavailableError(absl::StrCat("hierarchical setup through the store failed (rank ",
                                               rank, "): ", message.substr(0, message.find('\n'))));
  }
  return NewShmCommunicator(std::move(group), options.shm);
}

}  // namespace baton::trainer
