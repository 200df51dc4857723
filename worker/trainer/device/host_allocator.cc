#include "worker/trainer/device/host_allocator.h"

#include <malloc.h>

#include "absl/strings/match.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {
namespace {

// glibc's upper bound for M_MMAP_THRESHOLD on 64-bit hosts (DEFAULT_MMAP_THRESHOLD_MAX):
// larger requests are always mapped afresh.
constexpr int kMmapThresholdBytes = 32 << 20;

// Heap space above this at its top is returned to the kernel: effectively never.
constexpr int kTrimThresholdBytes = 1 << 30;

constexpr const char* kMallocVariables[] = {
    "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_",
    "MALLOC_MMAP_MAX_",       "MALLOC_ARENA_MAX",       "MALLOC_ARENA_TEST",
};

}  // namespace

bool MallocTunedByEnvironment(const HostEnvLookup& lookup) {
  if (const char* tunables = lookup("GLIBC_TUNABLES");
      tunables != nullptr && absl::StrContains(tunables, "glibc.malloc.")) {
    return true;
  }
  for (const char* name : kMallocVariables) {
    if (lookup(name) != nullptr) return true;
  }
  return false;
}

bool KeepFreedHostMemory(const HostEnvLookup& lookup) {
  if (MallocTunedByEnvironment(lookup)) return false;
  // Setting either also stops glibc from adjusting both as it goes (which would let the
  // trim threshold follow the largest freed block back down).
  return ::mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes) == 1 &&
         ::mallopt(M_TRIM_THRESHOLD, kTrimThresholdBytes) == 1;
}

}  // namespace baton::trainer
