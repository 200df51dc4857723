#pragma once

// Joining a job's process group: rendezvous through a c10d TCPStore (rank 0 serves it on
// master_port, the others connect to master_addr:master_port), then the collective
// backend that fits the device: for CUDA tensors NCCL (it exists only when the LibTorch in
// use has CUDA; see nccl_communicator.h); for CPU tensors shared memory when every rank
// runs on this host and can map one segment (shm_communicator.h), shared memory inside each
// host and Gloo between hosts when ranks share hosts (hierarchical_communicator.h), else
// Gloo.

#include <c10/core/Device.h>

#include <cstddef>
#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/trainer/comm/communicator.h"
#include "worker/trainer/comm/host/shm_segment.h"

namespace baton::trainer {

struct RendezvousOptions {
  int rank = 0;
  int world_size = 1;
  std::string master_addr;  // Host of rank 0's store.
  int master_port = 0;      // Port rank 0 serves the store on, 1..65535.
  // Namespace for the store keys, e.g. "baton/<job>/<generation>", so that a late process of
  // an older generation cannot join this one's process group.
  std::string store_prefix = "baton";
  // How long to wait for all ranks to reach the store.
  absl::Duration timeout = absl::Minutes(5);
};

// Connects to (rank 0: serves) the store and waits for all ranks. UNAVAILABLE naming the
// address, rank and timeout on failure; INVALID_ARGUMENT on inconsistent options.
absl::StatusOr<c10::intrusive_ptr<c10d::Store>> ConnectStore(const RendezvousOptions& options);

// Collective backend for CPU tensors. Hosts are told apart by host keys
// (comm/host/host_topology.h).
enum class CpuBackend {
  // One host: shared memory. Several hosts, at least one with more than one rank:
  // hierarchical. Otherwise Gloo. Where shared memory turns out unusable (found out by
  // trying), every rank falls back to flat Gloo and says why on stderr.
  kAuto,
  kShm,   // Shared memory or fail (FAILED_PRECONDITION, e.g. ranks on several hosts).
  kGloo,  // Flat Gloo between all ranks.
  // Shared memory inside each host, Gloo between one leader per host; FAILED_PRECONDITION
  // if shared memory is unusable inside some host.
  kHierarchical,
};

// "auto", "shm", "gloo", "hierarchical"; INVALID_ARGUMENT naming the allowed values
// otherwise.
absl::StatusOr<CpuBackend> ParseCpuBackend(const std::string& name);

struct ProcessGroupOptions {
  RendezvousOptions rendezvous;
  CpuBackend cpu_backend = CpuBackend::kAuto;
  // Where this rank trains: CPU -> Gloo, CUDA -> NCCL on that GPU.
  c10::Device device = c10::Device(c10::kCPU);
  // How long one collective may take before it fails (a hung peer).
  absl::Duration collective_timeout = absl::Minutes(5);
  // Gloo (flat, or between hosts' leaders): interface to bind (GLOO_SOCKET_IFNAME). Empty:
  // loopback when master_addr is a loopback address, else the address this host's name
  // resolves to.
  std::string gloo_interface;
  // This rank's host key (BATON_HOST_KEY): ranks with equal keys count as one host. Empty:
  // DefaultHostKey() (comm/host/host_topology.h).
  std::string host_key;
  // Bytes per rank of a host's shared-memory segment (ShmOptions::slot_bytes); the same
  // on every rank.
  size_t shm_slot_bytes = ShmOptions().slot_bytes;
  // The job sends point to point between any two ranks (pipeline stages). The hierarchical
  // backend only moves tensors between hosts through their leaders, so "auto" picks flat
  // Gloo instead of it for several hosts sharing some host.
  bool point_to_point = false;
  // Shared memory: run each collective on the thread that waits for it, not on a
  // communication thread (ShmOptions::collectives_on_waiter; see UseCommunicationThread).
  bool shm_collectives_on_waiter = false;
};

// Whether a shared-memory communication thread per rank has a core to run on: the CPUs
// this process may use (`cpus`, e.g. UsableCpus() of common/cpus.h) hold the host's
// training threads (local_world_size x threads_per_rank) and one more per rank. Where they
// do not (2 ranks of 1 thread on 2 cores), the thread cannot overlap anything with
// backward: it only adds two wake-ups per collective and competes with the training
// threads for a core, and running the collective on the waiting thread is faster
// (bench/README.md).
bool UseCommunicationThread(int cpus, int local_world_size, int threads_per_rank);

// The CPU backend options.cpu_backend names, over a connected store (JoinProcessGroup's
// second half; tests pass their own store). Errors as the backends' Create* functions.
absl::StatusOr<std::unique_ptr<Communicator>> CreateCpuCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, const ProcessGroupOptions& options);

// A LocalCommunicator on options.device for a world of one (except a CUDA device with a
// master_addr: NCCL); otherwise ConnectStore and the backend for the device. Errors as
// ConnectStore; FAILED_PRECONDITION for a CUDA device when this LibTorch has no NCCL.
absl::StatusOr<std::unique_ptr<Communicator>> JoinProcessGroup(const ProcessGroupOptions& options);

}  // namespace baton::trainer
