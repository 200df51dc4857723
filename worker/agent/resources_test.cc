#include "worker/agent/resources.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace baton::worker {
namespace {

std::string TestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::string dir = std::string(tmp ? tmp : "/tmp") + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void WriteFile(const std::string& path, const std::string& text, bool executable = false) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
  if (executable) ::chmod(path.c_str(), 0755);
}

constexpr char kInformation[] =
    "Model: \t\t NVIDIA H200\n"
    "IRQ:   \t\t 42\n"
    "GPU UUID: \t GPU-0000\n"
    "Bus Location: \t 0000:01:00.0\n";

TEST(ParseGpuModelTest, ReadsModelLine) {
  EXPECT_EQ(ParseGpuModel(kInformation), "NVIDIA H200");
  EXPECT_EQ(ParseGpuModel("IRQ: 1\n"), "");
}

TEST(ParseNvidiaSmiMemoryTest, MebibytesToBytesAndUnknownAsZero) {
  EXPECT_THAT(ParseNvidiaSmiMemory("81559\n[N/A]\n\n 16 \n"),
              ::testing::ElementsAre(81559LL << 20, 0, 16LL << 20));
  EXPECT_THAT(ParseNvidiaSmiMemory(""), ::testing::IsEmpty());
}

TEST(DetectGpusTest, NoDriverMeansNoGpus) {
  ResourceProbe probe;
  probe.nvidia_gpus_dir = TestDir("no-driver") + "/missing";
  EXPECT_THAT(DetectGpus(probe), ::testing::IsEmpty());
}

TEST(DetectGpusTest, NamesInPciOrderAndMemoryFromNvidiaSmi) {
  const std::string dir = TestDir("gpus");
  WriteFile(dir + "/gpus/0000:81:00.0/information", "Model: \t NVIDIA A100\n");
  WriteFile(dir + "/gpus/0000:01:00.0/information", kInformation);
  WriteFile(dir + "/nvidia-smi", "#!/bin/sh\necho 100\necho 200\n", /*executable=*/true);
  ResourceProbe probe;
  probe.nvidia_gpus_dir = dir + "/gpus";
  probe.nvidia_smi = dir + "/nvidia-smi";

  const std::vector<baton::v1::Gpu> gpus = DetectGpus(probe);
  ASSERT_EQ(gpus.size(), 2u);
  EXPECT_EQ(gpus[0].index(), 0);
  EXPECT_EQ(gpus[0].name(), "NVIDIA H200");
  EXPECT_EQ(gpus[0].memory_bytes(), 100LL << 20);
  EXPECT_EQ(gpus[1].index(), 1);
  EXPECT_EQ(gpus[1].name(), "NVIDIA A100");
  EXPECT_EQ(gpus[1].memory_bytes(), 200LL << 20);
}

TEST(DetectGpusTest, WithoutNvidiaSmiMemoryIsUnknown) {
  const std::string dir = TestDir("gpus-no-smi");
  WriteFile(dir + "/gpus/0000:01:00.0/information", kInformation);
  ResourceProbe probe;
  probe.nvidia_gpus_dir = dir + "/gpus";
  probe.nvidia_smi = dir + "/does-not-exist";
  const std::vector<baton::v1::Gpu> gpus = DetectGpus(probe);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].name(), "NVIDIA H200");
  EXPECT_EQ(gpus[0].memory_bytes(), 0);
}

TEST(DetectGpusTest, NvidiaSmiDisagreeingOnCountIsIgnored) {
  const std::string dir = TestDir("gpus-bad-smi");
  WriteFile(dir + "/gpus/0000:01:00.0/information", kInformation);
  WriteFile(dir + "/nvidia-smi", "#!/bin/sh\necho 1\necho 2\n", /*executable=*/true);
  ResourceProbe probe;
  probe.nvidia_gpus_dir = dir + "/gpus";
  probe.nvidia_smi = dir + "/nvidia-smi";
  const std::vector<baton::v1::Gpu> gpus = DetectGpus(probe);
  ASSERT_EQ(gpus.size(), 1u);
  EXPECT_EQ(gpus[0].memory_bytes(), 0);
}

TEST(SlotDevicesTest, OneGpuPerSlotOrNone) {
  EXPECT_THAT(SlotDevices(4, 4, nullptr), ::testing::ElementsAre("0", "1", "2", "3"));
  EXPECT_THAT(SlotDevices(4, 2, ""), ::testing::ElementsAre("0", "1", "2", "3"));
  // The worker's own list (e.g. a container's GPUs), entries as they are named.
  EXPECT_THAT(SlotDevices(8, 2, "GPU-aa, 5"), ::testing::ElementsAre("GPU-aa", "5"));
  // Too few for the slots, or no GPUs: no table.
  EXPECT_THAT(SlotDevices(2, 4, nullptr), ::testing::IsEmpty());
  EXPECT_THAT(SlotDevices(8, 4, "1,2"), ::testing::IsEmpty());
  EXPECT_THAT(SlotDevices(0, 1, nullptr), ::testing::IsEmpty());
  EXPECT_THAT(SlotDevices(0, 1, "0"), ::testing::IsEmpty());
}

TEST(DetectResourcesTest, SlotsDefaultToGpusElseOne) {
  ResourceProbe none;
  none.nvidia_gpus_dir = TestDir("res-none") + "/missing";
  baton::v1::Resources r = DetectResources(0, none);
  EXPECT_EQ(r.slots(), 1);
  EXPECT_EQ(r.gpus_size(), 0);
  EXPECT_GE(r.cpu_cores(), 1);
  EXPECT_EQ(DetectResources(4, none).slots(), 4);

  const std::string dir = TestDir("res-two");
  WriteFile(dir + "/gpus/0000:01:00.0/information", kInformation);
  WriteFile(dir + "/gpus/0000:02:00.0/information", kInformation);
  ResourceProbe two;
  two.nvidia_gpus_dir = dir + "/gpus";
  two.nvidia_smi = "";
  EXPECT_EQ(DetectResources(0, two).slots(), 2);
  EXPECT_EQ(DetectResources(1, two).slots(), 1);
}

}  // namespace
}  // namespace baton::worker
