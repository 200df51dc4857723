// Device memory counters from CUDA's caching allocator (see device.h) and host staging on a
// side stream (host_staging.h); compiled only against a LibTorch with CUDA.

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>
#include <vector>

#define BATON_COMPAT_CUDA 1
#include "worker/trainer/device/compat.h"
#include "worker/trainer/device/device.h"
#include "worker/trainer/device/host_staging.h"

namespace baton::trainer {

std::optional<DeviceMemory> MemoryStats(const c10::Device& device) {
  if (!device.is_cuda()) return std::nullopt;
  const compat::CudaMemory m = compat::CudaMemoryStats(device.index());
  return DeviceMemory{m.allocated_bytes, m.reserved_bytes, m.peak_allocated_bytes};
}

void ResetPeakMemory(const c10::Device& device) {
  if (device.is_cuda()) compat::ResetCudaPeak(device.index());
}

struct HostStaging::Impl {
  std::optional<c10::cuda::CUDAStream> side;  // From the pool, on the first device staged.
  std::vector<at::Tensor> buffers;            // Pinned; the round's in Stage() order.
  size_t next = 0;                            // Buffers used by the current round.
  at::cuda::CUDAEvent done;                   // Recorded on `side` after each copy.
  bool pending = false;                       // A copy was queued since the last Wait().
};

HostStaging::HostStaging() : impl_(std::make_unique<Impl>()) {}
HostStaging::~HostStaging() {
  if (impl_->pending) impl_->done.synchronize();  // No copy lands in a freed buffer.
}

at::Tensor HostStaging::Stage(const at::Tensor& tensor) {
  if (!tensor.is_cuda()) return tensor;
  Impl& m = *impl_;
  const c10::DeviceIndex index = tensor.device().index();
  const c10::cuda::CUDAGuard device_guard(index);
  if (!m.side.has_value() || m.side->device_index() != index) {
    m.side = c10::cuda::getStreamFromPool(/*isHighPriority=*/false, index);
  }
  // After everything queued so far on the compute stream (the step that made the values).
  at::cuda::CUDAEvent ready;
  ready.record(c10::cuda::getCurrentCUDAStream(index));
  ready.block(*m.side);
  if (m.next == m.buffers.size()) m.buffers.emplace_back();
  at::Tensor& host = m.buffers[m.next++];
  if (!host.defined() || host.sizes() != tensor.sizes() ||
      host.scalar_type() != tensor.scalar_type()) {
    host = at::empty(tensor.sizes(),
                     at::TensorOptions().dtype(tensor.scalar_type()).pinned_memory(true));
  }
  {
    const c10::cuda::CUDAStreamGuard stream_guard(*m.side);
    host.copy_(tensor, /*non_blocking=*/true);
  }
  // The caching allocator must not give the tensor's memory to another before the copy ran.
  tensor.record_stream(*m.side);
  m.done.record(*m.side);
  m.pending = true;
  return host;
}

void HostStaging::Wait() {
  Impl& m = *impl_;
  if (m.pending) m.done.synchronize();
  m.pending = false;
  m.next = 0;
}

}  // namespace baton::trainer
