#include "worker/trainer/testing/python_runner.h"

#include <sys/wait.h>

#include <array>
#include <atomic>
#include <cstdio>
#include <fstream>

#include "absl/strings/str_cat.h"

namespace baton::trainer::testing {

absl::StatusOr<std::string> RunPython3(const std::string& script, const std::string& dir) {
  static std::atomic<int> counter{0};
  const std::string path = absl::StrCat(dir, "/script_", counter++, ".py");
  {
    std::ofstream out(path);
    out << script;
    if (!out) return absl::InternalError(absl::StrCat("writing ", path));
  }
  FILE* pipe = ::popen(absl::StrCat("/usr/bin/python3 '", path, "' 2>&1").c_str(), "r");
  if (pipe == nullptr) return absl::InternalError("popen failed");
  std::string output;
  std::array<char, 4096> buf;
  while (size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) output.append(buf.data(), n);
  const int rc = ::pclose(pipe);
  if (rc == -1 || !WIFEXITED(rc) || WEXITSTATUS(rc) != 0) {
    return absl::InternalError(
        absl::StrCat("/usr/bin/python3 ", path, " failed (", rc, "):\n", output));
  }
  return output;
}

}  // namespace baton::trainer::testing
