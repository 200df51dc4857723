#pragma once

// Joining a job's process group: rendezvous through a c10d TCPStore (rank 0 serves it on
// master_port, the others connect to master_addr:master_port), then the collective
// backend that fits the device: for CUDA tensors NCCL (it exists only when the LibTorch in
// use has CUDA; see nccl_communicator.h); for CPU tensors shared memory when every rank
// runs on this host and can map one segment (shm_communicator.h), else Gloo.

#include <c10/core/Device.h>

#include <memory>
#include <string>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/trainer/communicator.h"

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

// Collective backend for CPU tensors.
enum class CpuBackend {
  kAuto,  // Shared memory if every rank can map one segment (one host), else Gloo.
  kShm,   // Shared memory or fail (FAILED_PRECONDITION, e.g. ranks on several hosts).
  kGloo,
};

// "auto", "shm", "gloo"; INVALID_ARGUMENT naming the allowed values otherwise.
absl::StatusOr<CpuBackend> ParseCpuBackend(const std::string& name);

struct ProcessGroupOptions {
  RendezvousOptions rendezvous;
  CpuBackend cpu_backend = CpuBackend::kAuto;
  // Where this rank trains: CPU -> Gloo, CUDA -> NCCL on that GPU.
  c10::Device device = c10::Device(c10::kCPU);
  // How long one collective may take before it fails (a hung peer).
  absl::Duration collective_timeout = absl::Minutes(5);
  // Gloo: interface to bind (GLOO_SOCKET_IFNAME). Empty: loopback when master_addr is a
  // loopback address, else the address this host's name resolves to.
  std::string gloo_interface;
};

// A LocalCommunicator on options.device for a world of one (except a CUDA device with a
// master_addr: NCCL); otherwise ConnectStore and the backend for the device. Errors as ConnectStore; FAILED_PRECONDITION for a CUDA
// device when this LibTorch has no NCCL.
absl::StatusOr<std::unique_ptr<Communicator>> JoinProcessGroup(const ProcessGroupOptions& options);

}  // namespace baton::trainer
