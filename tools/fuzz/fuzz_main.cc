// main() of a fuzz target in the normal build (tools/fuzz/fuzz.bzl): runs the target's
// LLVMFuzzerTestOneInput over every input file named on the command line (a directory
// stands for the files in it), then over a fixed number of mutations of them
// (tools/fuzz/mutator.h) from a fixed seed. Count-based and deterministic, so it is a
// repeatable test: a crash or sanitizer report fails it, and the input that failed is
// written to $TEST_UNDECLARED_OUTPUTS_DIR/crash_input (or ./crash_input) as it dies.
//
// BATON_FUZZ_MUTATIONS overrides the number of mutations (default kDefaultMutations).

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
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
// Provided by the ASan/UBSan runtimes (gcc's and clang's) when linked: runs `callback`
// before a sanitizer report ends the process.
extern "C" void __sanitizer_set_death_callback(void (*callback)()) __attribute__((weak));

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

// The input being run, and where a dying process saves it.
std::string current_input;
std::string crash_path;

void SaveCurrentInput() {
  const int fd = open(crash_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  if (write(fd, current_input.data(), current_input.size()) < 0) std::perror("crash_input");
  close(fd);
}

void OnFatalSignal(int signal) {
  SaveCurrentInput();
  std::signal(signal, SIG_DFL);
  std::raise(signal);
}

void SaveInputOnCrash() {
  const char* dir = std::getenv("TEST_UNDECLARED_OUTPUTS_DIR");
  crash_path = std::string(dir ? dir : ".") + "/crash_input";
  for (int signal : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(signal, OnFatalSignal);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(SaveCurrentInput);
}

void Run(const std::string& input) {
  current_input = input;
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(input.data()), input.size());
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
  SaveInputOnCrash();
  const std::vector<std::string> inputs = LoadInputs({argv + 1, argv + argc});
  for (const std::string& input : inputs) Run(input);
  Run("");
  baton::trainer::Prng rng(kSeed);
  const uint64_t mutations = MutationCount();
  for (uint64_t i = 0; i < mutations; ++i) {
    std::string input = inputs.empty() ? std::string() : inputs[i % inputs.size()];
    Mutate(input, inputs, kMaxInputSize, rng);
    Run(input);
  }
  std::printf("fuzz: %zu corpus inputs and %llu mutations ran\n", inputs.size(),
              static_cast<unsigned long long>(mutations));
  return 0;
}
