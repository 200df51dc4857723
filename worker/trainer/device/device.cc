#include "worker/trainer/device/device.h"

#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/cuda.h>

#include <exception>

#include "absl/strings/str_cat.h"

namespace baton::trainer {

absl::StatusOr<c10::Device> ResolveDevice(absl::string_view flag, int local_rank) {
  if (flag != "auto" && flag != "cpu" && flag != "cuda") {
    return absl::InvalidArgumentError(
        absl::StrCat("--device=", flag, " is not one of auto, cpu, cuda"));
  }
  if (flag == "cpu") return c10::Device(c10::kCPU);
  const int64_t gpus = torch::cuda::is_available() ? torch::cuda::device_count() : 0;
  if (gpus == 0) {
    if (flag == "cuda") {
      return absl::FailedPreconditionError("--device=cuda but no CUDA device is usable");
    }
    return c10::Device(c10::kCPU);
  }
  const c10::Device device(c10::kCUDA, static_cast<c10::DeviceIndex>(local_rank % gpus));
  try {
    c10::impl::getDeviceGuardImpl(c10::kCUDA)->setDevice(device);
  } catch (const std::exception& e) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot use ", device.str(), ": ", e.what()));
  }
  return device;
}

void SynchronizeDevice(const c10::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace baton::trainer
