#pragma once

// Whole-file reads and writes with statuses that name the file. No LibTorch.
// Thread-safe (no shared state).

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {

// The bytes of `path`. NOT_FOUND if it does not exist, FAILED_PRECONDITION if it cannot be
// opened or read (a directory, no permission).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path);

// Replaces `path` with `bytes`, creating missing parent directories. INTERNAL on failure.
absl::Status WriteWholeFile(const std::string& path, absl::string_view bytes);

}  // namespace baton::trainer
