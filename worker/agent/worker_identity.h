#pragma once

#include <string>

#include "absl/status/statusor.h"

namespace baton::worker {

// Returns the worker id kept in <work_dir>/worker_id so a restarted daemon keeps its identity.
// If the file is missing (or empty), creates a random id ("w-" + 16 hex digits) and stores it
// atomically (write to a temporary file, then rename). `work_dir` must exist.
// Errors: INTERNAL when the file cannot be read or written.
absl::StatusOr<std::string> LoadOrCreateWorkerId(const std::string& work_dir);

}  // namespace baton::worker
