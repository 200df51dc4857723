#include "worker/trainer/contract/launch_env.h"

#include <cstdlib>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker/trainer/contract/contract.h"

namespace baton::trainer {
namespace {

// The integer value of `name`, nullopt if unset or empty.
template <typename Int>
absl::StatusOr<std::optional<Int>> ReadInt(const EnvLookup& lookup, const char* name) {
  const char* value = lookup(name);
  if (value == nullptr || *value == '\0') return std::optional<Int>();
  Int parsed;
  if (!absl::SimpleAtoi(value, &parsed)) {
    return absl::InvalidArgumentError(
        absl::StrCat("environment variable ", name, "='", value, "' is not an integer"));
  }
  return std::optional<Int>(parsed);
}

absl::Status OutOfRange(const char* name, int64_t value, absl::string_view expected) {
  return absl::InvalidArgumentError(
      absl::StrCat("environment variable ", name, "=", value, " must be ", expected));
}

}  // namespace

absl::StatusOr<LaunchEnv> ParseLaunchEnv(const EnvLookup& lookup) {
  LaunchEnv env;
  ASSIGN_OR_RETURN(const std::optional<int> world, ReadInt<int>(lookup, kEnvWorldSize));
  ASSIGN_OR_RETURN(const std::optional<int> rank, ReadInt<int>(lookup, kEnvRank));
  if (world.has_value()) {
    if (*world < 1) return OutOfRange(kEnvWorldSize, *world, ">= 1");
    if (!rank.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "environment variable ", kEnvRank, " is required when ", kEnvWorldSize, " is set"));
    }
    env.world_size = *world;
  }
  env.rank = rank.value_or(0);
  if (env.rank < 0 || env.rank >= env.world_size) {
    return OutOfRange(kEnvRank, env.rank, absl::StrCat("in [0, ", env.world_size, ")"));
  }

  ASSIGN_OR_RETURN(const std::optional<int> local_world, ReadInt<int>(lookup, kEnvLocalWorldSize));
  ASSIGN_OR_RETURN(const std::optional<int> local_rank, ReadInt<int>(lookup, kEnvLocalRank));
  ASSIGN_OR_RETURN(const std::optional<int> group_rank, ReadInt<int>(lookup, kEnvGroupRank));
  env.local_world_size = local_world.value_or(1);
  env.local_rank = local_rank.value_or(0);
  env.group_rank = group_rank.value_or(0);
  if (env.local_world_size < 1) return OutOfRange(kEnvLocalWorldSize, env.local_world_size, ">= 1");
  if (env.local_rank < 0 || env.local_rank >= env.local_world_size) {
    return OutOfRange(kEnvLocalRank, env.local_rank,
                      absl::StrCat("in [0, ", env.local_world_size, ")"));
  }
  if (env.group_rank < 0) return OutOfRange(kEnvGroupRank, env.group_rank, ">= 0");

  // Required for a gang; optional for a world of one (a GPU then still goes through NCCL,
  // the path multi-GPU runs take).
  const char* master = lookup(kEnvMasterAddr);
  if (env.world_size > 1 || (master != nullptr && *master != '\0')) {
    const char* addr = master;
    if (addr == nullptr || *addr == '\0') {
      return absl::InvalidArgumentError(absl::StrCat("environment variable ", kEnvMasterAddr,
                                                     " is required when WORLD_SIZE > 1"));
    }
    env.master_addr = addr;
    ASSIGN_OR_RETURN(const std::optional<int> port, ReadInt<int>(lookup, kEnvMasterPort));
    if (!port.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat("environment variable ", kEnvMasterPort,
                                                     " is required with MASTER_ADDR"));
    }
    if (*port < 1 || *port > 65535) return OutOfRange(kEnvMasterPort, *port, "in [1, 65535]");
    env.master_port = *port;
  }

  if (const char* job = lookup(kEnvJobId); job != nullptr) env.job_id = job;
  ASSIGN_OR_RETURN(const std::optional<int64_t> generation,
                   ReadInt<int64_t>(lookup, kEnvGeneration));
  env.generation = generation.value_or(0);
  if (env.generation < 0) return OutOfRange(kEnvGeneration, env.generation, ">= 0");
  ASSIGN_OR_RETURN(const std::optional<int> fd, ReadInt<int>(lookup, kEnvMetricsFd));
  env.metrics_fd = fd.value_or(-1);
  if (fd.has_value() && *fd < 0) return OutOfRange(kEnvMetricsFd, *fd, ">= 0");
  return env;
}

absl::StatusOr<LaunchEnv> LaunchEnvFromProcess() {
  return ParseLaunchEnv([](const char* name) { return std::getenv(name); });
}

}  // namespace baton::trainer
