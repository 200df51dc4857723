#pragma once

// The torchrun-style environment a trainer process is launched with (see contract.h).
// Plain C++; thread-compatible.

#include <cstdint>
#include <functional>
#include <string>

#include "absl/status/statusor.h"

namespace baton::trainer {

struct LaunchEnv {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  int local_world_size = 1;
  int group_rank = 0;
  std::string master_addr;  // Set when world_size > 1 (optional for a world of one).
  int master_port = 0;      // 1..65535 when master_addr is set.
  std::string job_id;       // BATON_JOB_ID; may be empty outside Baton.
  int64_t generation = 0;   // BATON_GENERATION; 0 outside Baton.
  int metrics_fd = -1;      // BATON_METRICS_FD; -1 = not set.
};

// Looks a variable up; returns nullptr when unset. Lets tests avoid the real environment.
using EnvLookup = std::function<const char*(const char*)>;

// Parses and validates the environment. INVALID_ARGUMENT naming the variable when a value
// is malformed or inconsistent (RANK outside [0, WORLD_SIZE), missing MASTER_ADDR, ...).
// Does not check that BATON_METRICS_FD is open.
absl::StatusOr<LaunchEnv> ParseLaunchEnv(const EnvLookup& lookup);

// ParseLaunchEnv over the process environment.
absl::StatusOr<LaunchEnv> LaunchEnvFromProcess();

}  // namespace baton::trainer
