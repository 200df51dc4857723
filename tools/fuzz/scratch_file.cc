#include "tools/fuzz/scratch_file.h"

#include <stdlib.h>  // mkdtemp

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace baton::fuzz {
namespace {

// Creates a fresh directory on first use and removes it (recursively) at exit.
class ScratchDir {
 public:
  ScratchDir() {
    const char* base = std::filesystem::is_directory("/dev/shm") ? "/dev/shm" : nullptr;
    if (base == nullptr) base = std::getenv("TEST_TMPDIR");
    if (base == nullptr) base = std::getenv("TMPDIR");
    std::string pattern = std::string(base ? base : "/tmp") + "/baton-fuzz-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror("mkdtemp");
      std::abort();
    }
    path_ = pattern;
  }
  ~ScratchDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

const std::string& ScratchPath() {
  static const ScratchDir dir;
  return dir.path();
}

}  // namespace

std::string EmptyScratchSubdir(absl::string_view name) {
  const std::string path = ScratchPath() + "/" + std::string(name);
  std::error_code error;
  std::filesystem::remove_all(path, error);
  if (error || !std::filesystem::create_directory(path, error)) {
    std::fprintf(stderr, "cannot create %s: %s\n", path.c_str(), error.message().c_str());
    std::abort();
  }
  return path;
}

std::string WriteScratchFile(absl::string_view bytes, absl::string_view name) {
  const std::string path = ScratchPath() + "/" + std::string(name);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.close();
  if (!out) {
    std::fprintf(stderr, "cannot write %s\n", path.c_str());
    std::abort();
  }
  return path;
}

}  // namespace baton::fuzz
