#pragma once

// A pre-flight's checks of the host itself (RunPreflight, worker_service.proto): what a
// job's ranks will need from it beyond the network.

#include <cstdint>
#include <string>
#include <vector>

#include "baton/v1/job.pb.h"
#include "baton/v1/worker_service.pb.h"

namespace baton::worker {

// "shm": creates a segment of `bytes` in `dir` (a tmpfs: /dev/shm, where the ranks' shared
// memory transport and the trainer's checkpoints in memory live), reserves its space
// (posix_fallocate: a full tmpfs is an error here, not a SIGBUS in a rank), writes a pattern
// through a mapping, reads it back, and removes the segment. The detail names the bytes
// and the space left, or what failed and the OS error. Thread-safe.
baton::v1::HostCheck CheckSharedMemory(const std::string& dir, int64_t bytes);

// What NVML says of the host's GPUs, where the library is present.
struct NvmlView {
  bool present = false;             // libnvidia-ml could be loaded and initialised
  int device_count = 0;             // nvmlDeviceGetCount
  std::vector<std::string> errors;  // per device that NVML could not open, why
};

// Loads libnvidia-ml.so.1 (dlopen) and asks it for the GPUs; present == false without it.
NvmlView QueryNvml();

// "gpu": the GPUs the driver lists now (`detected`, worker/agent/resources.h's DetectGpus)
// against the `registered` count the worker offered; with NVML present, its count and
// every device it could not open. Not ok when a GPU is gone or NVML cannot open one.
baton::v1::HostCheck CheckGpus(int registered, const std::vector<baton::v1::Gpu>& detected,
                               const NvmlView& nvml);

}  // namespace baton::worker
