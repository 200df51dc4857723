#include "worker/supervisor/rank_env.h"

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/spec/job_spec.h"
#include "worker/trainer/contract/contract.h"

namespace baton::worker {
namespace {

constexpr absl::string_view kInheritedNames[] = {
    "PATH", "LD_LIBRARY_PATH", "HOME", "USER",   "LOGNAME",       "SHELL",
    "LANG", "LANGUAGE",        "TZ",   "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR",
};
constexpr absl::string_view kInheritedPrefixes[] = {
    "LC_", "CUDA_", "NCCL_", "NVIDIA_", "GLOO_", "OMP_", "MKL_", "KMP_", "TORCH_",
};

}  // namespace

bool IsInheritedEnvName(const std::string& name) {
  for (absl::string_view inherited : kInheritedNames) {
    if (name == inherited) return true;
  }
  for (absl::string_view prefix : kInheritedPrefixes) {
    if (absl::StartsWith(name, prefix)) return true;
  }
  return false;
}

std::vector<std::string> BuildRankEnv(const RankEnvInput& input,
                                      std::vector<std::string>* ignored) {
  std::map<std::string, std::string> env;
  for (const std::string& entry : input.base_env) {
    const size_t eq = entry.find('=');
    if (eq == std::string::npos || eq == 0) continue;
    std::string name = entry.substr(0, eq);
    if (IsInheritedEnvName(name)) env[std::move(name)] = entry.substr(eq + 1);
  }
  for (const auto& [name, value] : input.spec_env) {
    if (baton::IsReservedEnvName(name) ||
        (name == "CUDA_VISIBLE_DEVICES" && !input.visible_devices.empty())) {
      if (ignored != nullptr) ignored->push_back(name);
      continue;
    }
    env[name] = value;
  }
  env.emplace("OMP_NUM_THREADS", "1");  // Only if neither the worker nor the spec set it.

  const baton::v1::RankInfo& r = input.rank;
  const int32_t groups = r.local_world_size() > 0
                             ? (input.world_size + r.local_world_size() - 1) / r.local_world_size()
                             : 1;
  env[trainer::kEnvRank] = absl::StrCat(r.rank());
  env[trainer::kEnvWorldSize] = absl::StrCat(input.world_size);
  env[trainer::kEnvLocalRank] = absl::StrCat(r.local_rank());
  env[trainer::kEnvLocalWorldSize] = absl::StrCat(r.local_world_size());
  env[trainer::kEnvGroupRank] = absl::StrCat(r.group_rank());
  env["GROUP_WORLD_SIZE"] = absl::StrCat(groups);
  env["ROLE_RANK"] = absl::StrCat(r.rank());
  env["ROLE_WORLD_SIZE"] = absl::StrCat(input.world_size);
  env["ROLE_NAME"] = "default";
  env[trainer::kEnvMasterAddr] = input.master_addr;
  env[trainer::kEnvMasterPort] = absl::StrCat(input.master_port);
  env["TORCHELASTIC_RUN_ID"] = input.job_id;
  env["TORCHELASTIC_RESTART_COUNT"] = absl::StrCat(std::max<int64_t>(input.generation - 1, 0));
  env["TORCHELASTIC_MAX_RESTARTS"] = "0";
  env[trainer::kEnvJobId] = input.job_id;
  env[trainer::kEnvGeneration] = absl::StrCat(input.generation);
  env[trainer::kEnvMetricsFd] = absl::StrCat(input.metrics_fd);
  if (!input.checkpoint_dir.empty()) env[trainer::kEnvCheckpointDir] = input.checkpoint_dir;
  if (!input.visible_devices.empty()) {
    env["CUDA_VISIBLE_DEVICES"] = absl::StrJoin(input.visible_devices, ",");
  }

  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(absl::StrCat(name, "=", value));
  return out;
}

}  // namespace baton::worker
