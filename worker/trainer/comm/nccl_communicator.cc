// The NCCL backend; compiled only against a LibTorch with CUDA (USE_C10D_NCCL).

#include "worker/trainer/comm/nccl_communicator.h"

#include <c10/core/DeviceGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>

#include <chrono>
#include <exception>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/trainer/comm/c10d_communicator.h"

namespace baton::trainer {
namespace {

bool NcclReduces(c10::ScalarType dtype) {
  return dtype == c10::kFloat || dtype == c10::kDouble || dtype == c10::kHalf ||
         dtype == c10::kBFloat16 || dtype == c10::kInt || dtype == c10::kLong ||
         dtype == c10::kByte || dtype == c10::kChar;
}

}  // namespace

bool NcclAvailable() { return true; }

absl::StatusOr<std::unique_ptr<Communicator>> CreateNcclCommunicator(
    const c10::intrusive_ptr<c10d::Store>& store, int rank, int world_size, int device_index,
    absl::Duration collective_timeout) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("rank ", rank, " not in world of ", world_size));
  }
  const c10::Device device(c10::kCUDA, static_cast<c10::DeviceIndex>(device_index));
  try {
    // ProcessGroupNCCL uses the current device for its communicators.
    c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(device);
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout =
        std::chrono::milliseconds(absl::ToInt64Milliseconds(collective_timeout));
    auto group = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world_size, options);
    return std::unique_ptr<Communicator>(new C10dCommunicator<c10d::ProcessGroupNCCL>(
        std::move(group), device, "nccl", &NcclReduces, C10dShardedCollectives::kNative));
  } catch (const std::exception& e) {
    return absl::UnavailableError(absl::StrCat("creating the NCCL process group (rank ", rank,
                                               " of ", world_size, ", cuda:", device_index,
                                               "): ", C10dPending::FirstLine(e.what())));
  }
}

}  // namespace baton::trainer
