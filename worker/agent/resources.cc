#include "worker/agent/resources.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>  // std::sort
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cpus.h"
#include "common/logging.h"
#include "worker/process/path_lookup.h"

namespace baton::worker {
namespace {

std::string ReadFileOrEmpty(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs `command` through /bin/sh and returns its stdout; "" if it fails.
std::string RunAndCapture(const std::string& command) {
  FILE* pipe = ::popen(command.c_str(), "re");
  if (pipe == nullptr) return "";
  std::string out;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = ::pclose(pipe);
  return status == 0 ? out : "";
}

}  // namespace

std::string ParseGpuModel(absl::string_view information) {
  for (absl::string_view line : absl::StrSplit(information, '\n')) {
    if (absl::StartsWith(line, "Model:")) {
      return std::string(absl::StripAsciiWhitespace(line.substr(6)));
    }
  }
  return "";
}

std::vector<int64_t> ParseNvidiaSmiMemory(absl::string_view output) {
  std::vector<int64_t> bytes;
  for (absl::string_view line : absl::StrSplit(output, '\n', absl::SkipWhitespace())) {
    int64_t mib = 0;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(line), &mib) || mib < 0) mib = 0;
    bytes.push_back(mib * (int64_t{1} << 20));
  }
  return bytes;
}

std::vector<baton::v1::Gpu> DetectGpus(const ResourceProbe& probe) {
  std::vector<std::filesystem::path> dirs;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(probe.nvidia_gpus_dir, ec)) {
    if (entry.is_directory(ec)) dirs.push_back(entry.path());
  }
  std::sort(dirs.begin(), dirs.end());  // PCI address order == nvidia-smi's default order.
  std::vector<baton::v1::Gpu> gpus;
  for (const auto& dir : dirs) {
    baton::v1::Gpu gpu;
    gpu.set_index(static_cast<int32_t>(gpus.size()));
    gpu.set_name(ParseGpuModel(ReadFileOrEmpty(dir / "information")));
    gpus.push_back(std::move(gpu));
  }
  if (gpus.empty() || probe.nvidia_smi.empty()) return gpus;

  const char* path_env = ::getenv("PATH");
  absl::StatusOr<std::string> smi = FindExecutable(probe.nvidia_smi, path_env ? path_env : "");
  if (!smi.ok() || !IsExecutableFile(*smi)) return gpus;
  const std::vector<int64_t> memory = ParseNvidiaSmiMemory(RunAndCapture(absl::StrCat(
      "'", *smi, "' --query-gpu=memory.total --format=csv,noheader,nounits", " 2>/dev/null")));
  if (memory.size() != gpus.size()) {
    BATON_LOG(WARNING) << "nvidia-smi reported " << memory.size() << " GPUs, /proc has "
                       << gpus.size() << "; GPU memory left unknown";
    return gpus;
  }
  for (size_t i = 0; i < gpus.size(); ++i) gpus[i].set_memory_bytes(memory[i]);
  return gpus;
}

baton::v1::Resources DetectResources(int slots, const ResourceProbe& probe) {
  baton::v1::Resources resources;
  for (baton::v1::Gpu& gpu : DetectGpus(probe)) *resources.add_gpus() = std::move(gpu);
  resources.set_cpu_cores(UsableCpus());
  if (slots <= 0) slots = resources.gpus_size() > 0 ? resources.gpus_size() : 1;
  resources.set_slots(slots);
  return resources;
}

std::vector<std::string> SlotDevices(int gpus, int slots, const char* cuda_visible_devices) {
  std::vector<std::string> devices;
  if (cuda_visible_devices != nullptr && *cuda_visible_devices != '\0') {
    for (absl::string_view entry : absl::StrSplit(cuda_visible_devices, ',')) {
      entry = absl::StripAsciiWhitespace(entry);
      if (!entry.empty()) devices.emplace_back(entry);
    }
  } else {
    for (int i = 0; i < gpus; ++i) devices.push_back(absl::StrCat(i));
  }
  if (gpus == 0 || static_cast<int>(devices.size()) < slots) devices.clear();
  return devices;
}

}  // namespace baton::worker
