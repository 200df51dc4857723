#pragma once

// `baton profile` between the worker and a rank: the worker writes a request file into the
// rank's profile directory and sends SIGUSR2; the trainer reads the file at its next step,
// records the window and writes the trace (or, for a request it refuses, an error file)
// into the same directory, where the worker collects it. Both sides use these names and
// this format; neither restates them.
//
// The request file (kProfileRequestFile) is one line of space-separated tokens:
//   id=<1-64 of [A-Za-z0-9._-]> steps=<1..kMaxProfileSteps> [start_step=<N >= 1>]
// Absent keys take the defaults of ProfileRequest (a missing file: all defaults).

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace baton::trainer {

inline constexpr char kProfileRequestFile[] = "profile-request";
inline constexpr int64_t kMaxProfileSteps = 10000;

struct ProfileRequest {
  std::string id = "manual";
  int64_t steps = 0;
  int64_t start_step = 0;  // 0: the next step.
};

// Whether `id` may name a request: 1-64 of [A-Za-z0-9._-] (it becomes part of file names).
bool ValidProfileRequestId(absl::string_view id);

// The request file's line for `request` (worker side), ending in '\n'. `request` must be
// valid (an id ValidProfileRequestId accepts, steps in [1, kMaxProfileSteps]).
std::string EncodeProfileRequest(const ProfileRequest& request);

// Parses the request file's line (trainer side); `steps` defaults to `default_steps`.
// INVALID_ARGUMENT naming the bad token and what is allowed.
absl::StatusOr<ProfileRequest> ParseProfileRequest(absl::string_view line, int64_t default_steps);

// The files a rank writes into its profile directory: the trace of request `id`
// (trace-<id>-rank<rank>.json), an error for it (.error), and the error for a request file
// it could not parse (trace-unknown-rank<rank>.error).
std::string ProfileTraceFile(absl::string_view id, int rank);
std::string ProfileErrorFile(absl::string_view id, int rank);
std::string ProfileUnknownRequestErrorFile(int rank);

}  // namespace baton::trainer
