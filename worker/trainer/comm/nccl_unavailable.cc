// CreateNcclCommunicator for a LibTorch without CUDA (see nccl_communicator.h).

#include "worker/trainer/comm/nccl_communicator.h"

namespace baton::trainer {

bool NcclAvailable() { return false; }

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const c10::intrusive_ptr<c10d::Store>& /*store*/, int /*rank*/, int /*world_size*/,
    int /*device_index*/, absl::Duration /*collective_timeout*/) {
  return absl::FailedPreconditionError(
      "the NCCL backend is not built: this LibTorch has no CUDA (build with "
      "LIBTORCH_HOME pointing at a CUDA LibTorch)");
}

}  // namespace baton::trainer
