#include "worker/trainer/comm/process_group.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"
#include "worker/trainer/comm/gloo_communicator.h"
#include "worker/trainer/comm/hierarchical_communicator.h"
#include "worker/trainer/comm/host/host_topology.h"
#include "worker/trainer/comm/nccl_communicator.h"
#include "worker/trainer/comm/shm_communicator.h"

namespace baton::trainer {
namespace {

bool IsLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || absl::StartsWith(host, "127.");
}

// Returns once something accepts TCP connections at host:port, or at `deadline` (the
// caller then connects anyway and reports what fails). LibTorch's TCPStore client sleeps a
// whole second after a refused connection; ranks started from warm standbys reach the
// rendezvous within milliseconds of each other, often before rank 0 listens, so they probe
// every few milliseconds first.
void WaitForListener(const std::string& host, int port, absl::Time deadline) {
  struct addrinfo hints = {};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  struct addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return;
  for (;;) {
    for (const struct addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      const bool connected = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
      ::close(fd);
      if (connected) {
        ::freeaddrinfo(found);
        return;
      }
    }
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  ::freeaddrinfo(found);
}

}  // namespace

bool UseCommunicationThread(int cpus, int local_world_size, int threads_per_rank) {
  return static_cast<int64_t>(cpus) >=
         static_cast<int64_t>(local_world_size) * (static_cast<int64_t>(threads_per_rank) + 1);
}

absl::StatusOr<CpuBackend> ParseCpuBackend(const std::string& name) {
  if (name == "auto") return CpuBackend::kAuto;
  if (name == "shm") return CpuBackend::kShm;
  if (name == "gloo") return CpuBackend::kGloo;
  if (name == "hierarchical") return CpuBackend::kHierarchical;
  return absl::InvalidArgumentError(
      absl::StrCat("cpu_backend '", name, "' is not one of auto, shm, gloo, hierarchical"));
}

absl::StatusOr<std::unique_ptr<Communicator>> CreateCpuCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, const ProcessGroupOptions& options) {
  const RendezvousOptions& rdzv = options.rendezvous;
  HierarchicalOptions layers;
  layers.shm.collective_timeout = options.collective_timeout;
  layers.shm.slot_bytes = options.shm_slot_bytes;
  layers.shm.collectives_on_waiter = options.shm_collectives_on_waiter;
  layers.gloo.collective_timeout = options.collective_timeout;
  layers.gloo.interface = options.gloo_interface;
  if (layers.gloo.interface.empty() && IsLoopback(rdzv.master_addr)) {
    layers.gloo.hostname = "127.0.0.1";
  }
  switch (options.cpu_backend) {
    case CpuBackend::kGloo:
      return CreateGlooCommunicator(store, rdzv.rank, rdzv.world_size, layers.gloo);
    case CpuBackend::kShm:
      return CreateShmCommunicator(store, rdzv.rank, rdzv.world_size, layers.shm);
    case CpuBackend::kAuto:
    case CpuBackend::kHierarchical:
      break;
  }
  ASSIGN_OR_RETURN(const HostTopology topology,
                   ExchangeHostKeys(store, rdzv.rank, rdzv.world_size, options.host_key));
  if (options.cpu_backend == CpuBackend::kHierarchical) {
    return CreateHierarchicalCommunicator(store, rdzv.rank, topology, layers);
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm;
  if (topology.num_hosts() == 1) {
    // The keys only propose one host; trying the segment is what proves it (and works for
    // two single-slot workers on one machine, which LOCAL_WORLD_SIZE would not show).
    comm = CreateShmCommunicator(store, rdzv.rank, rdzv.world_size, layers.shm);
  } else if (topology.AnyHostShared() && !options.point_to_point) {
    comm = CreateHierarchicalCommunicator(store, rdzv.rank, topology, layers);
  } else {
    return CreateGlooCommunicator(store, rdzv.rank, rdzv.world_size, layers.gloo);
  }
  // Every rank gets the same FAILED_PRECONDITION, so all of them fall back together.
  if (comm.ok() || comm.status().code() != absl::StatusCode::kFailedPrecondition) return comm;
  std::fprintf(stderr, "baton-trainer: shared memory unusable (%s), using flat Gloo: %s\n",
               topology.ToString().c_str(), std::string(comm.status().message()).c_str());
  return CreateGlooCommunicator(store, rdzv.rank, rdzv.world_size, layers.gloo);
}

absl::StatusOr<c10::intrusive_ptr<c10d::Store>> ConnectStore(const RendezvousOptions& options) {
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("rank ", options.rank, " not in world of ", options.world_size));
  }
  if (options.master_addr.empty() || options.master_port < 1 || options.master_port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("bad rendezvous address '", options.master_addr,
                                                   ":", options.master_port, "'"));
  }
  try {
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(options.master_port);
    store_options.isServer = options.rank == 0;
    store_options.numWorkers = static_cast<size_t>(options.world_size);
    store_options.waitWorkers = true;
    store_options.timeout = std::chrono::milliseconds(absl::ToInt64Milliseconds(options.timeout));
    if (options.rank != 0) {
      WaitForListener(options.master_addr, options.master_port, absl::Now() + options.timeout);
    }
    auto tcp_store = c10::make_intrusive<c10d::TCPStore>(options.master_addr, store_options);
    return c10::intrusive_ptr<c10d::Store>(
        c10::make_intrusive<c10d::PrefixStore>(options.store_prefix, std::move(tcp_store)));
  } catch (const std::exception& e) {
    const std::string message = e.what();
    return absl::UnavailableError(absl::StrCat(
        "rendezvous at ", options.master_addr, ":", options.master_port, " failed (rank ",
        options.rank, " of ", options.world_size, ", timeout ",
        absl::FormatDuration(options.timeout), "): ", message.substr(0, message.find('\n'))));
  }
}

absl::StatusOr<std::unique_ptr<Communicator>> JoinProcessGroup(
    const ProcessGroupOptions& options) {
  const RendezvousOptions& rdzv = options.rendezvous;
  const bool cuda = options.device.is_cuda();
  if (cuda && !NcclAvailable()) {
    return absl::FailedPreconditionError(
        "training on CUDA needs the NCCL backend, which this build lacks");
  }
  if (!cuda && !options.device.is_cpu()) {
    return absl::InvalidArgumentError(
        absl::StrCat("no collective backend for device ", options.device.str()));
  }
  // A world of one needs no collectives, except that a GPU given a rendezvous address
  // goes through NCCL anyway: the path multi-GPU runs take (tools/gpu_check.sh uses it).
  if (rdzv.world_size == 1 && !(cuda && !rdzv.master_addr.empty())) {
    return std::unique_ptr<Communicator>(new LocalCommunicator(options.device));
  }
  ASSIGN_OR_RETURN(c10::intrusive_ptr<c10d::Store> store, ConnectStore(rdzv));
  const std::string where = absl::StrCat(rdzv.master_addr, ":", rdzv.master_port);
  absl::StatusOr<std::unique_ptr<Communicator>> comm;
  if (cuda) {
    comm = CreateNcclCommunicator(store, rdzv.rank, rdzv.world_size, options.device.index(),
                                  options.collective_timeout);
  } else {
    comm = CreateCpuCommunicator(store, options);
  }
  if (!comm.ok()) {
    return absl::Status(comm.status().code(), absl::StrCat("after rendezvous at ", where, ": ",
                                                           comm.status().message()));
  }
  return comm;
}

}  // namespace baton::trainer
