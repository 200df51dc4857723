#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "baton/v1/job.pb.h"

namespace baton::worker {

// Where resource detection looks; tests point these at fakes.
struct ResourceProbe {
  // One directory per NVIDIA GPU (named by PCI address), each with an `information` file.
  std::string nvidia_gpus_dir = "/proc/driver/nvidia/gpus";
  // nvidia-smi, looked up on PATH if it has no '/'. Empty: do not query GPU memory.
  std::string nvidia_smi = "nvidia-smi";
};

// Detects the NVIDIA GPUs cheaply: the model name comes from <nvidia_gpus_dir>/*/information
// (indexes follow PCI address order, as nvidia-smi numbers them); memory comes from
// `nvidia-smi --query-gpu=memory.total` when that tool exists and answers one line per GPU,
// else memory_bytes stays 0. Never fails: no driver means no GPUs.
std::vector<baton::v1::Gpu> DetectGpus(const ResourceProbe& probe);

// What the worker offers: `slots` training slots if > 0, else one per GPU, else 1; the CPUs
// it may run on (UsableCpus, common/cpus.h).
baton::v1::Resources DetectResources(int slots, const ResourceProbe& probe);

// The GPUs the supervisor hands out, one per slot (SupervisorOptions::devices), as
// CUDA_VISIBLE_DEVICES names them: the entries of the worker's own `cuda_visible_devices`
// when it is set and non-empty, else "0" .. "gpus - 1". Empty (ranks then share the GPUs
// by LOCAL_RANK, as without a table) when there are none, or fewer than `slots`.
std::vector<std::string> SlotDevices(int gpus, int slots, const char* cuda_visible_devices);

// The value of the "Model:" line of a /proc/driver/nvidia/gpus/*/information file, or "" if absent.
std::string ParseGpuModel(absl::string_view information);

// Parses `nvidia-smi --query-gpu=memory.total --format=csv,noheader,nounits` output: one MiB
// value per line, returned in bytes; a line that is not a number (e.g. "[N/A]") gives 0.
std::vector<int64_t> ParseNvidiaSmiMemory(absl::string_view output);

}  // namespace baton::worker
