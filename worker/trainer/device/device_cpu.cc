// Device memory counters and host staging for a LibTorch without CUDA (see device.h and
// host_staging.h).

#include "worker/trainer/device/device.h"
#include "worker/trainer/device/host_staging.h"

namespace baton::trainer {

std::optional<DeviceMemory> MemoryStats(const c10::Device& /*device*/) { return std::nullopt; }

void ResetPeakMemory(const c10::Device& /*device*/) {}

// Without CUDA every tensor is on the CPU: nothing to stage.
struct HostStaging::Impl {};

HostStaging::HostStaging() = default;
HostStaging::~HostStaging() = default;

at::Tensor HostStaging::Stage(const at::Tensor& tensor) { return tensor; }

void HostStaging::Wait() {}

}  // namespace baton::trainer
