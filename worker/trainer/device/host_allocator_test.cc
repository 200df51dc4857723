#include "worker/trainer/device/host_allocator.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <string>

#include "gtest/gtest.h"

namespace baton::trainer {
namespace {

HostEnvLookup Env(std::map<std::string, std::string> vars) {
  return [vars = std::move(vars)](const char* name) -> const char* {
    auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  };
}

TEST(HostAllocatorTest, TheUsersMallocSettingsStand) {
  EXPECT_FALSE(MallocTunedByEnvironment(Env({})));
  EXPECT_FALSE(MallocTunedByEnvironment(Env({{"GLIBC_TUNABLES", "glibc.pthread.rseq=0"}})));
  EXPECT_TRUE(MallocTunedByEnvironment(
      Env({{"GLIBC_TUNABLES", "glibc.pthread.rseq=0:glibc.malloc.trim_threshold=0"}})));
  EXPECT_TRUE(MallocTunedByEnvironment(Env({{"MALLOC_ARENA_MAX", "2"}})));
  EXPECT_TRUE(MallocTunedByEnvironment(Env({{"MALLOC_MMAP_THRESHOLD_", "0"}})));
  EXPECT_FALSE(KeepFreedHostMemory(Env({{"MALLOC_TRIM_THRESHOLD_", "0"}})));
}

long MinorFaults() {
  struct rusage usage = {};
  ::getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Allocates, touches and frees `bytes`; returns the minor page faults that took.
long FaultsOfOneRound(size_t bytes) {
  const long before = MinorFaults();
  char* block = static_cast<char*>(std::malloc(bytes));
  std::memset(block, 1, bytes);
  // The block escapes: the compiler may not drop the allocation or the writes.
  asm volatile("" : : "r"(block) : "memory");
  std::free(block);
  return MinorFaults() - before;
}

// What a training step does: the same large block every step. Once freed memory is kept,
// a later round reuses the pages it touched the first time instead of faulting them in.
TEST(HostAllocatorTest, AFreedLargeBlockIsReusedWithoutPageFaults) {
  ASSERT_TRUE(KeepFreedHostMemory(Env({})));
  constexpr size_t kBytes = size_t{16} << 20;  // 4096 pages.
  EXPECT_GT(FaultsOfOneRound(kBytes), 1000);   // The first time the pages are new.
  for (int round = 0; round < 3; ++round) {
    EXPECT_LT(FaultsOfOneRound(kBytes), 100) << "round " << round;
  }
}

}  // namespace
}  // namespace baton::trainer
