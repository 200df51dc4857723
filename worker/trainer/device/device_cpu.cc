// Device memory counters for a LibTorch without CUDA (see device.h).

#include "worker/trainer/device/device.h"

namespace baton::trainer {

std::optional<DeviceMemory> MemoryStats(const c10::Device& /*device*/) { return std::nullopt; }

void ResetPeakMemory(const c10::Device& /*device*/) {}

}  // namespace baton::trainer
