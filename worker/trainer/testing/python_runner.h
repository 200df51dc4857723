#pragma once

// Test helper: runs a script with Debian's /usr/bin/python3 (which has python3-torch 1.13;
// the `python3` on PATH may not) to compare against PyTorch.

#include <string>

#include "absl/status/statusor.h"

namespace baton::trainer::testing {

// Writes `script` to a file under `dir` and runs it. Returns stdout+stderr on exit 0;
// INTERNAL with the output otherwise.
absl::StatusOr<std::string> RunPython3(const std::string& script, const std::string& dir);

}  // namespace baton::trainer::testing
