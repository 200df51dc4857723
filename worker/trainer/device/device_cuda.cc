// Device memory counters from CUDA's caching allocator (see device.h); compiled only
// against a LibTorch with CUDA.

#define BATON_COMPAT_CUDA 1
#include "worker/trainer/device/compat.h"
#include "worker/trainer/device/device.h"

namespace baton::trainer {

std::optional<DeviceMemory> MemoryStats(const c10::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  const compat::CudaMemory m = compat::CudaMemoryStats(device.index());
  return DeviceMemory{m.allocated_bytes, m.reserved_bytes, m.peak_allocated_bytes};
}

void ResetPeakMemory(const c10::Device& device) {
  if (device.is_cuda()) compat::ResetCudaPeak(device.index());
}

}  // namespace baton::trainer
