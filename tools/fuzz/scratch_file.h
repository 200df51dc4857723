#pragma once

// For fuzz targets of readers that take a path: the fuzz input written to a file in a
// private scratch directory, removed when the process exits. The directory is in /dev/shm
// when it exists (a file write per input on disk would make fuzzing I/O-bound), else under
// $TEST_TMPDIR, $TMPDIR or /tmp. Not thread-safe: one fuzz input at a time.

#include <string>

#include "absl/strings/string_view.h"

namespace baton::fuzz {

// Replaces the scratch file `name` (a plain file name) with `bytes` and returns its path.
// Aborts if the file cannot be written: the target would test nothing.
std::string WriteScratchFile(absl::string_view bytes, absl::string_view name = "input");

// An empty directory inside the scratch directory (`name`, emptied if it exists), for
// targets that write several files.
std::string EmptyScratchSubdir(absl::string_view name);

}  // namespace baton::fuzz
