// main() of a fuzz target in the normal build (tools/fuzz/fuzz.bzl): runs the target's
// LLVMFuzzerTestOneInput over every input file named on the command line (a directory
// stands for the files in it), then over a fixed number of mutations of them
// (tools/fuzz/mutator.h) from a fixed seed. Count-based and deterministic, so it is a
// repeatable test: a crash or sanitizer report fails it, and the mutation that failed is
// written to $TEST_UNDECLARED_OUTPUTS_DIR (or the current directory) before it runs.
//
// BATON_FUZZ_MUTATIONS overrides the number of mutations (default kDefaultMutations).

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "tools/fuzz/mutator.h"
#include "worker/trainer/data/formats/random.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) __attribute__((weak));

namespace baton::fuzz {
namespace {

constexpr uint64_t kDefaultMutations = 3000;
constexpr uint64_t kSeed = 0x62a70f0f22;
constexpr size_t kMaxInputSize = 1 << 16;

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The contents of every file `args` name (directories: their files, sorted by name).
std::vector<std::string> LoadInputs(const std::vector<std::string>& args) {
  std::vector<std::filesystem::path> files;
  for (const std::string& arg : args) {
    if (!std::filesystem::is_directory(arg)) {
      files.emplace_back(arg);
      continue;
    }
    std::vector<std::filesystem::path> in_dir;
    for (const auto& entry : std::filesystem::directory_iterator(arg)) {
      if (entry.is_regular_file()) in_dir.push_back(entry.path());
    }
    std::sort(in_dir.begin(), in_dir.end());
    files.insert(files.end(), in_dir.begin(), in_dir.end());
  }
  std::vector<std::string> inputs;
  for (const auto& file : files) inputs.push_back(ReadFile(file));
  return inputs;
}

void Run(const std::string& input) {
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
}

// Saves the input about to run, so that a crash leaves it behind (overwritten each time).
void SaveCurrent(const std::string& input) {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  std::ofstream(std::string(dir ? dir : ".") + "/current_input", std::ios::binary) << input;
}

uint64_t MutationCount() {
  const char* env = std::getenv("BATON_FUZZ_MUTATIONS");
  return env ? std::strtoull(env, nullptr, 10) : kDefaultMutations;
}

}  // namespace
}  // namespace baton::fuzz

int main(int argc, char** argv) {
  using namespace baton::fuzz;
  if (LLVMFuzzerInitialize) LLVMFuzzerInitialize(&argc, &argv);
  const std::vector<std::string> inputs = LoadInputs({argv + 1, argv + argc});
  for (const std::string& input : inputs) Run(input);
  Run("");
  baton::trainer::Prng rng(kSeed);
  const uint64_t mutations = MutationCount();
  for (uint64_t i = 0; i < mutations; ++i) {
    std::string input = inputs.empty() ? std::string() : inputs[i % inputs.size()];
    Mutate(input, inputs, kMaxInputSize, rng);
    SaveCurrent(input);
    Run(input);
  }
  std::printf("fuzz: %zu corpus inputs and %llu mutations ran\n", inputs.size(),
              static_cast<unsigned long long>(mutations));
  return 0;
}
