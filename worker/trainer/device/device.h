#pragma once

// Which device a rank trains on, and the device facts the trainer reports. CUDA-specific
// parts live in device_cuda.cc, compiled only against a LibTorch with CUDA (else
// device_cpu.cc), so callers need no #ifdef.
//
// Thread-safe (stateless, except CUDA's own process-wide current device).

#include <c10/core/Device.h>

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {

// --device: "auto" (CUDA when a GPU is visible, else CPU), "cpu" or "cuda". With CUDA the
// rank uses GPU local_rank % device_count and makes it current. INVALID_ARGUMENT for
// another value; FAILED_PRECONDITION for "cuda" without a usable GPU.
absl::StatusOr<c10::Device> ResolveDevice(absl::string_view flag, int local_rank);

// Waits for all queued work on `device` (no-op on CPU). Used to time phases honestly.
void SynchronizeDevice(const c10::Device& device);

struct DeviceMemory {
  int64_t allocated_bytes = 0;       // Live tensors.
  int64_t reserved_bytes = 0;        // Held by the caching allocator.
  int64_t peak_allocated_bytes = 0;  // Since the last ResetPeakMemory.
};

// The caching allocator's counters for a CUDA device; nullopt on CPU.
std::optional<DeviceMemory> MemoryStats(const c10::Device& device);
void ResetPeakMemory(const c10::Device& device);

}  // namespace baton::trainer
