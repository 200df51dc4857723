#pragma once

// Every LibTorch API difference the trainer depends on, in one place. Nothing outside this
// header tests TORCH_VERSION_*.
//
// Verified: Debian's LibTorch 1.13.1 (CPU; Bazel, every test) and the pip wheel of
// LibTorch 2.11.0+cu130 on an H200 (g++ 13, -std=c++17, the wheel's include/ and lib/:
// the trainer, the unit tests, cuda_test and GPU training runs built and passed, which
// exercises the 2.4+ autocast branch, float16 CPU autocast, Gloo bfloat16 and the CUDA
// memory counters). Newer LibTorch (2.12+/2.13+, per upstream notes) requires C++20 for
// ATen consumers: raise --cxxopt=-std= in .bazelrc when building against one.
//
// Not version-dependent but easy to trip on: at::NoGradGuard is no longer reachable
// through <ATen/ATen.h> in 2.11; use c10::NoGradGuard (<c10/core/GradMode.h>, both).
//
//   autocast      1.13 .. 2.3: per-device functions (set_enabled / set_cpu_enabled,
//                 set_autocast_gpu_dtype / set_autocast_cpu_dtype).
//                 2.4+: device-typed set_autocast_enabled(device, on) /
//                 set_autocast_dtype(device, dtype); the old names are deprecated.
//                 CPU autocast accepts only bfloat16 in 1.13 (set_autocast_cpu_dtype
//                 throws for float16, seen here); float16 CPU autocast works in 2.11
//                 (assumed from 2.4 on).
//   c10d          1.13: ProcessGroupGloo/ProcessGroupNCCL derive from c10d::ProcessGroup.
//                 2.0+: they derive from c10d::Backend (ProcessGroup became a dispatcher
//                 over backends). The trainer never names either base: comm/c10d_communicator.h
//                 is a template over the concrete group, whose collectives (allreduce,
//                 broadcast with AllreduceOptions/BroadcastOptions, returning
//                 c10::intrusive_ptr<c10d::Work>, Work::wait()) have the same signatures
//                 in both. ProcessGroupNCCL's constructor (store, rank, size, Options) and
//                 Options::create() + ->timeout are the same too.
//                 Gloo reduces bfloat16 in 2.x (seen in 2.11; assumed from 2.1 on) but
//                 not in 1.13 ("Invalid scalar type", seen here); float16 works in both.
//   CUDA memory   c10::cuda::CUDACachingAllocator::getDeviceStats(device) in both; its
//                 DeviceStats moved to c10::CachingDeviceAllocator in 2.5 but keeps the
//                 fields used here (allocated_bytes/reserved_bytes[AGGREGATE = 0]
//                 .current/.peak). Only CUDA translation units include that header: they
//                 define BATON_COMPAT_CUDA before including this one.
//   autograd      FunctionPostHook::operator()(outputs, inputs) and
//                 Node::add_post_hook(unique_ptr) are the same; 2.x adds a virtual
//                 compiled_args() with a default (only torch.compile calls it).

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>
#include <c10/core/ScalarType.h>
#include <torch/version.h>

#define BATON_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||        \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace baton::trainer::compat {

inline constexpr int kTorchMajor = TORCH_VERSION_MAJOR;
inline constexpr int kTorchMinor = TORCH_VERSION_MINOR;

// ---- autocast --------------------------------------------------------------------------

// Whether autocast to `dtype` on `device` is supported by this LibTorch.
inline bool AutocastSupported(c10::DeviceType device, c10::ScalarType dtype) {
  const bool low = dtype == c10::kBFloat16 || dtype == c10::kHalf;
  if (device == c10::kCUDA) return low;
  if (device == c10::kCPU) {
    return dtype == c10::kBFloat16 || (dtype == c10::kHalf && BATON_TORCH_AT_LEAST(2, 4));
  }
  return false;
}

inline bool IsAutocastEnabled(c10::DeviceType device) {
#if BATON_TORCH_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::kCUDA ? at::autocast::is_enabled() : at::autocast::is_cpu_enabled();
#endif
}

inline void SetAutocastEnabled(c10::DeviceType device, bool enabled) {
#if BATON_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, enabled);
#else
  if (device == c10::kCUDA) {
    at::autocast::set_enabled(enabled);
  } else {
    at::autocast::set_cpu_enabled(enabled);
  }
#endif
}

inline c10::ScalarType GetAutocastDtype(c10::DeviceType device) {
#if BATON_TORCH_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::kCUDA ? at::autocast::get_autocast_gpu_dtype()
                              : at::autocast::get_autocast_cpu_dtype();
#endif
}

// Only for a supported (device, dtype) pair (1.13 throws for CPU float16).
inline void SetAutocastDtype(c10::DeviceType device, c10::ScalarType dtype) {
#if BATON_TORCH_AT_LEAST(2, 4)
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::kCUDA) {
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}

// Entering/leaving an autocast region; the cast cache is cleared when the outermost
// region is left (as Python's torch.autocast.__exit__ does).
inline void EnterAutocast() { at::autocast::increment_nesting(); }
inline void LeaveAutocast() {
  if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
}

// ---- c10d ------------------------------------------------------------------------------

// Whether ProcessGroupGloo can all-reduce this dtype.
inline bool GlooReduces(c10::ScalarType dtype) {
  if (dtype == c10::kBFloat16) return BATON_TORCH_AT_LEAST(2, 1);
  return dtype == c10::kFloat || dtype == c10::kDouble || dtype == c10::kHalf ||
         dtype == c10::kInt || dtype == c10::kLong || dtype == c10::kByte ||
         dtype == c10::kChar;
}

}  // namespace baton::trainer::compat

// ---- CUDA (only in translation units that define BATON_COMPAT_CUDA) ---------------------
#if defined(BATON_COMPAT_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>

#include <cstdint>

namespace baton::trainer::compat {

struct CudaMemory {
  int64_t allocated_bytes = 0;  // Live tensors now.
  int64_t reserved_bytes = 0;   // Held by the caching allocator now.
  int64_t peak_allocated_bytes = 0;  // Since the last ResetCudaPeak.
};

inline CudaMemory CudaMemoryStats(int device_index) {
  constexpr size_t kAggregate = 0;  // StatType::AGGREGATE in every version.
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(
      static_cast<c10::DeviceIndex>(device_index));
  CudaMemory m;
  m.allocated_bytes = stats.allocated_bytes[kAggregate].current;
  m.reserved_bytes = stats.reserved_bytes[kAggregate].current;
  m.peak_allocated_bytes = stats.allocated_bytes[kAggregate].peak;
  return m;
}

inline void ResetCudaPeak(int device_index) {
  c10::cuda::CUDACachingAllocator::resetPeakStats(static_cast<c10::DeviceIndex>(device_index));
}

}  // namespace baton::trainer::compat
#endif  // BATON_COMPAT_CUDA
