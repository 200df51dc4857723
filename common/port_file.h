#pragma once

// Port files: how a daemon started on port 0 tells scripts and tests the port it bound.

#include <string>

#include "absl/status/status.h"

namespace baton {

// Writes "<port>\n" to `path` atomically: into a temporary file in the same directory,
// then rename(2) over `path`, so a reader sees either no file (or the previous one) or the
// complete new content, never a partial one. An existing file is replaced.
// Errors: INTERNAL (with errno's text) if the temporary file cannot be written or renamed;
// the temporary file is removed then.
absl::Status WritePortFile(const std::string& path, int port);

}  // namespace baton
