#pragma once

// Communicator over c10d's ProcessGroupNCCL (CUDA tensors on one GPU per rank). Compiled
// only when the LibTorch in use has CUDA (@torch//:defs.bzl TORCH_HAS_CUDA); otherwise
// nccl_unavailable.cc provides CreateNcclCommunicator returning FAILED_PRECONDITION, so
// callers need no #ifdef.

#include <memory>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker/trainer/comm/communicator.h"

namespace baton::trainer {

// Whether this build has the NCCL backend.
bool NcclAvailable();

// Makes GPU `device_index` current for this process and builds the process group on
// `store` (NCCL communicators are created lazily by the first collective). Collectives run
// on NCCL's own stream, ordered after the current stream's work when they start; Wait()
// orders the current stream after them without blocking the host. INVALID_ARGUMENT for a
// bad rank or device; UNAVAILABLE if the group cannot be built; FAILED_PRECONDITION when
// NcclAvailable() is false.
absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size, int device_index,
    absl::Duration collective_timeout);

}  // namespace baton::trainer
